package sluice_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ontopix/sluice"
)

// TestLeaseByID drives a recorded lease from "another process": listed
// and released by id.
func TestLeaseByID(t *testing.T) {
	ctx := context.Background()
	c, _, _ := newClient(t)
	res, err := c.AcquireMany(ctx, []sluice.Request{{Dimension: "openai#tpm", Cost: 2000}, {Dimension: "elevenlabs#concurrent", Cost: 1}}, sluice.WithTTL(time.Second))
	if err != nil || !res.Granted() {
		t.Fatal(res.Outcome, err)
	}
	id := res.Lease.ID()
	ls, err := c.Leases(ctx, sluice.LeaseQuery{Dimension: "openai#tpm"})
	if err != nil || len(ls) != 1 || ls[0].ID != id || len(ls[0].Dimensions) != 2 {
		t.Fatalf("Leases = %+v, %v; want the one lease %s", ls, err, id)
	}
	rel, err := c.ReleaseLease(ctx, id)
	if err != nil || !rel.Released || len(rel.Restored) != 1 || rel.Restored[0].Dimension != "elevenlabs#concurrent" {
		t.Fatalf("ReleaseLease = %+v, %v; want released, one slot restored", rel, err)
	}
	if rel, err := c.ReleaseLease(ctx, id); err != nil || rel.Released {
		t.Errorf("second ReleaseLease = %+v, %v; want not released, no error", rel, err)
	}
	if _, err := c.ReleaseLease(ctx, "not-a-uuid"); !errors.Is(err, sluice.ErrInvalid) {
		t.Errorf("ReleaseLease(bad id): err = %v, want ErrInvalid", err)
	}
}
