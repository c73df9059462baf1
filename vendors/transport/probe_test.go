package transport_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/vendors"
)

// TestLoweredBucketNeverRefusesForever: a bucket lowered below what the
// profile publishes (a vendor's header followed down, or an operator's
// change) no longer holds a call that the published limit admits; the call
// takes the whole bucket and goes, so that the vendor's answer is heard.
// Before, it failed with ErrCostExceedsCapacity before reaching the vendor,
// and no response could ever restore the bucket.
func TestLoweredBucketNeverRefusesForever(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := waitEnv(t, 600, 60_000, nil)
		ctx := context.Background()
		st, err := e.client.GetBucket(ctx, waitTPM)
		if err != nil {
			t.Fatal(err)
		}
		low := vendors.ScaleConfig(st.Bucket.Config, 500, 60_000)
		if err := e.client.PutBucket(ctx, sluice.Bucket{Name: waitTPM, Config: low}); err != nil {
			t.Fatal(err)
		}
		oc := openAIClient(e, 0)
		if _, err := oc.Chat.Completions.New(ctx, chat(2000)); err != nil {
			t.Fatalf("a call the published limit admits, on a bucket lowered to %d: %v", low.Capacity, err)
		}
		if got := e.sim.Stats().Requests; got != 1 {
			t.Errorf("simulator saw %d requests, want 1", got)
		}
		if ev := lastEvent(t, e); ev.Err != nil {
			t.Errorf("event %v: %v", ev.Outcome, ev.Err)
		}
		// A cost above the published capacity is still refused.
		if _, err := oc.Chat.Completions.New(ctx, chat(70_000)); err == nil {
			t.Error("a call above the published capacity went through")
		}
	})
}
