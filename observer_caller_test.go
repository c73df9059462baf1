package sluice_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/ontopix/sluice"
)

// TestObserverCaller: the acquisition, wait and settlement events carry
// the caller the lease was acquired for: WithCaller's, else the client's
// default (Config.Caller), with and without a wait (a reservation, a
// polling wait).
func TestObserverCaller(t *testing.T) {
	tests := []struct {
		name   string
		opts   []sluice.AcquireOption
		wait   bool
		caller string
	}{
		{name: "acquire default", caller: "svc-default"},
		{name: "acquire WithCaller", opts: []sluice.AcquireOption{sluice.WithCaller("batch")}, caller: "batch"},
		{name: "wait default", wait: true, caller: "svc-default"},
		{name: "wait WithCaller", opts: []sluice.AcquireOption{sluice.WithCaller("batch")}, wait: true, caller: "batch"},
		{name: "polling wait WithCaller", opts: []sluice.AcquireOption{sluice.WithCaller("batch"), sluice.WithPolling()}, wait: true, caller: "batch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				var rec recorder
				cfg := sluice.DefaultConfig()
				cfg.Caller = "svc-default"
				c, _, _ := newClient(t, sluice.WithConfig(cfg), sluice.WithObserver(rec.observer()))
				var lease *sluice.Lease
				if tt.wait {
					l, err := c.Wait(ctx, []sluice.Request{{Dimension: "openai#tpm", Cost: 100}}, tt.opts...)
					if err != nil {
						t.Fatal(err)
					}
					lease = l
				} else {
					res, err := c.Acquire(ctx, "openai#tpm", append([]sluice.AcquireOption{sluice.WithCost(100)}, tt.opts...)...)
					if err != nil || !res.Granted() {
						t.Fatalf("Acquire = %+v, %v; want a grant", res, err)
					}
					lease = res.Lease
				}
				if _, err := lease.Settle(ctx, "openai#tpm", 40); err != nil {
					t.Fatal(err)
				}
				rec.mu.Lock()
				defer rec.mu.Unlock()
				if len(rec.acquired) == 0 {
					t.Fatal("no acquisition event")
				}
				for i, e := range rec.acquired {
					if e.Caller != tt.caller {
						t.Errorf("acquired[%d].Caller = %q, want %q", i, e.Caller, tt.caller)
					}
				}
				if tt.wait {
					if len(rec.waited) != 1 || rec.waited[0].Caller != tt.caller {
						t.Errorf("waited = %+v, want one event with Caller %q", rec.waited, tt.caller)
					}
				}
				if len(rec.settled) != 1 || rec.settled[0].Caller != tt.caller {
					t.Errorf("settled = %+v, want one event with Caller %q", rec.settled, tt.caller)
				}
			})
		})
	}
}
