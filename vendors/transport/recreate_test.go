package transport_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

// A transport on a client that knows its buckets keeps serving calls after
// the store lost them (a store restarted empty): the first call re-creates
// each of its dimensions once, and a call on a client that does not know
// them fails with an unknown dimension.
func TestStoreLostBuckets(t *testing.T) {
	p := openAIProfile(t, vendors.OpenAILimits{Model: "gpt-4o", RPM: 6000, TPM: 100_000})
	tests := []struct {
		name      string
		declare   bool
		wantOK    bool
		recreated int64
	}{
		{"declared buckets are re-created", true, true, 2},
		{"undeclared buckets stay missing", false, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim, err := vendorsim.New(vendorsim.Config{Vendor: vendorsim.OpenAI, Limits: vendorsim.Limits{RPM: 6000, TPM: 100_000}})
			if err != nil {
				t.Fatal(err)
			}
			st := memstore.New()
			var recreated atomic.Int64
			opts := []sluice.Option{sluice.WithClock(frozen),
				sluice.WithObserver(&sluice.Observer{Recreated: func(context.Context, sluice.RecreateEvent) { recreated.Add(1) }})}
			if tt.declare {
				opts = append(opts, sluice.WithBuckets(p.Buckets()))
			}
			c, err := sluice.New(st, opts...)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range p.Buckets() {
				if err := c.PutBucket(context.Background(), b); err != nil {
					t.Fatal(err)
				}
				// The store loses it, as one restarted empty does.
				if err := st.DeleteBucket(context.Background(), store.DeleteBucketRequest{Name: b.Name}); err != nil {
					t.Fatal(err)
				}
			}
			tr, err := transport.New(c, []vendors.Profile{p}, transport.WithBase(pipeRT{sim}),
				transport.WithRoute(transport.Route{Host: simHost, Vendor: p.Vendor}))
			if err != nil {
				t.Fatal(err)
			}
			hc := &http.Client{Transport: tr}
			for range 3 {
				body := `{"model":"gpt-4o","max_tokens":50,"messages":[{"role":"user","content":"hello there"}]}`
				req, _ := http.NewRequestWithContext(testCtx(t), http.MethodPost, "http://"+simHost+"/v1/chat/completions", strings.NewReader(body))
				resp, err := hc.Do(req)
				if ok := err == nil && resp.StatusCode == http.StatusOK; ok != tt.wantOK {
					t.Fatalf("call: %v, %v; want success %t", resp, err, tt.wantOK)
				}
				if !tt.wantOK && !errors.Is(err, sluice.ErrUnknownDimension) {
					t.Fatalf("call: %v, want an unknown dimension", err)
				}
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
				}
			}
			if n := recreated.Load(); n != tt.recreated {
				t.Errorf("%d re-creations, want %d", n, tt.recreated)
			}
		})
	}
}
