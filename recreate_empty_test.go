package sluice_test

import (
	"context"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store/memstore"
)

// TestRecreatedEmpty: a time-based bucket deleted behind the client's back
// comes back with nothing and earns from the re-creation on, so that the
// fleet, which spent its tokens before the loss, cannot spend them twice;
// a concurrent one comes back with every slot free (its holders' records
// were lost too, and their releases restore nothing).
func TestRecreatedEmpty(t *testing.T) {
	rpm := sluice.Bucket{Name: "o#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)}
	conc := sluice.Bucket{Name: "o#concurrent", Config: bucket.ConcurrentSlots(2)}
	ctx := context.Background()
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	clk := &manualClock{t: t0}
	c, err := sluice.New(st, sluice.WithClock(clk), sluice.WithBuckets([]sluice.Bucket{rpm, conc}))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []sluice.Bucket{rpm, conc} {
		if err := c.PutBucket(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	// The fleet spends most of the bucket and holds both slots, then the
	// store loses everything.
	if r, err := c.AcquireMany(ctx, []sluice.Request{{Dimension: "o#rpm", Cost: 8}}); err != nil || r.Outcome != sluice.Granted {
		t.Fatalf("AcquireMany(o#rpm 8) = %+v, %v; want granted", r, err)
	}
	for range 2 {
		if r, err := c.Acquire(ctx, "o#concurrent"); err != nil || r.Outcome != sluice.Granted {
			t.Fatalf("Acquire(concurrent) = %+v, %v; want granted", r, err)
		}
	}
	clk.Advance(time.Second)
	lose(t, st, rpm.Name, conc.Name)

	steps := []struct {
		name    string
		advance time.Duration
		dim     string
		want    sluice.Outcome
		tokens  int64 // the bucket's balance in millitokens after the call
	}{
		{"the re-created rate bucket has nothing", 0, "o#rpm", sluice.RetryIn, 0},
		{"the re-created concurrent bucket has its slots free", 0, "o#concurrent", sluice.Granted, 1000},
		{"the rate bucket earns from the re-creation on", 6 * time.Second, "o#rpm", sluice.Granted, 0},
		{"and no more", 0, "o#rpm", sluice.RetryIn, 0},
	}
	for _, s := range steps {
		clk.Advance(s.advance)
		r, err := c.Acquire(ctx, s.dim)
		if err != nil {
			t.Fatalf("%s: Acquire(%s) = %v", s.name, s.dim, err)
		}
		if r.Outcome != s.want {
			t.Errorf("%s: Acquire(%s) = %v, want %v", s.name, s.dim, r.Outcome, s.want)
		}
		if got := tokens(t, c, s.dim); got != s.tokens {
			t.Errorf("%s: %s has %d millitokens, want %d", s.name, s.dim, got, s.tokens)
		}
	}
}
