package sluice_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ontopix/sluice"
)

// TestLeaseByID drives a recorded lease from "another process": listed,
// extended, settled and released by id.
func TestLeaseByID(t *testing.T) {
	ctx := context.Background()
	c, clk, _ := newClient(t)
	res, err := c.AcquireMany(ctx, []sluice.Request{{Dimension: "openai#tpm", Cost: 2000}, {Dimension: "elevenlabs#concurrent", Cost: 1}}, sluice.WithTTL(time.Second))
	if err != nil || !res.Granted() {
		t.Fatal(res.Outcome, err)
	}
	id := res.Lease.ID()
	ls, err := c.Leases(ctx, sluice.LeaseQuery{Dimension: "openai#tpm"})
	if err != nil || len(ls) != 1 || ls[0].ID != id || len(ls[0].Dimensions) != 2 {
		t.Fatalf("Leases = %+v, %v; want the one lease %s", ls, err, id)
	}
	exp, err := c.ExtendLease(ctx, id, time.Minute)
	if err != nil || !exp.Equal(t0.Add(time.Minute)) {
		t.Fatalf("ExtendLease = %v, %v; want %v", exp, err, t0.Add(time.Minute))
	}
	st, err := c.SettleLease(ctx, id, "openai#tpm", 2000, 1200)
	if err != nil || st.Held != 1200 || st.Applied != -800_000 {
		t.Fatalf("SettleLease = %+v, %v; want held 1200, applied -800000", st, err)
	}
	if _, err := c.AdjustLease(ctx, id, "openai#tpm", -1201); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("refund above the held cost: err = %v, want ErrInvalid", err)
	}
	rel, err := c.ReleaseLease(ctx, id)
	if err != nil || !rel.Released || len(rel.Restored) != 1 || rel.Restored[0].Dimension != "elevenlabs#concurrent" {
		t.Fatalf("ReleaseLease = %+v, %v; want released, one slot restored", rel, err)
	}
	if rel, err := c.ReleaseLease(ctx, id); err != nil || rel.Released {
		t.Errorf("second ReleaseLease = %+v, %v; want not released, no error", rel, err)
	}
	clk.Advance(2 * time.Minute)
	if _, err := c.ExtendLease(ctx, id, time.Minute); !errors.Is(err, sluice.ErrLeaseExpired) {
		t.Errorf("ExtendLease after release: err = %v, want ErrLeaseExpired", err)
	}
	if _, err := c.ReleaseLease(ctx, "not-a-uuid"); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("ReleaseLease(bad id): err = %v, want ErrInvalid", err)
	}
}
