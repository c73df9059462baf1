package fleetsim

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ontopix/sluice"
)

// shortTimeout is the operation timeout of the member whose replies are
// lost or stalled.
const shortTimeout = time.Second

// TestLostReply drops the store's reply to a settlement or a cancellation
// after the store acted on it, then drains the bucket from another member:
// a resent settlement or cancellation that the store applies twice hands
// out tokens nobody returned.
func TestLostReply(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, m *Member)
	}{
		{"settle 500 to 300", func(t *testing.T, m *Member) {
			ctx := context.Background()
			invoked := m.rec.Now()
			res, err := m.Client.Acquire(ctx, "v#tpm", sluice.WithCost(500), sluice.WithRecord())
			if err != nil || res.Outcome != sluice.Granted {
				t.Fatalf("acquire 500: %v %v", res.Outcome, err)
			}
			// The vendor used 300: that is what counts at the grant.
			m.Granted(invoked, res.Lease, map[string]int64{"v#tpm": 300})
			m.Proxy.DropReplies(1)
			_, err = res.Lease.Adjust(ctx, "v#tpm", -200)
			t.Logf("adjust -200 with its reply lost: %v (replies dropped: %d)", err, m.Proxy.Dropped())
		}},
		{"settle 500 to 300, stalled past the timeout", func(t *testing.T, m *Member) {
			ctx := context.Background()
			invoked := m.rec.Now()
			res, err := m.Client.Acquire(ctx, "v#tpm", sluice.WithCost(500), sluice.WithRecord())
			if err != nil || res.Outcome != sluice.Granted {
				t.Fatalf("acquire 500: %v %v", res.Outcome, err)
			}
			m.Granted(invoked, res.Lease, map[string]int64{"v#tpm": 300})
			m.Proxy.SetLatency(nil, func() time.Duration { return shortTimeout + 500*time.Millisecond })
			_, err = res.Lease.Settle(ctx, "v#tpm", 300)
			m.Proxy.SetLatency(nil, nil)
			t.Logf("settle stalled past the operation timeout: %v", err)
			_, err = res.Lease.Settle(ctx, "v#tpm", 300) // the caller tries again
			t.Logf("settle again: %v", err)
		}},
		{"cancel a 400 reservation", func(t *testing.T, m *Member) {
			// Empty the bucket so that the reservation waits.
			if ok, err := m.Acquire(context.Background(), "v#tpm", 1000); !ok || err != nil {
				t.Fatalf("drain: %v %v", ok, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			done := make(chan error, 1)
			go func() {
				_, err := m.Client.Wait(ctx, []sluice.Request{{Dimension: "v#tpm", Cost: 400}})
				done <- err
			}()
			time.Sleep(300 * time.Millisecond) // reserved, sleeping
			m.Proxy.DropReplies(1)
			cancel()
			t.Logf("cancelled wait: %v (replies dropped: %d)", <-done, m.Proxy.Dropped())
		}},
	}
	for _, tt := range tests {
		for _, kind := range doorStores[1:] {
			t.Run(tt.name+"/"+kind, func(t *testing.T) {
				f := newFleet(t, kind)
				f.bucket("v#tpm", perPeriod(1000, time.Minute))
				a, b := f.join(Clock{}, withOpTimeout(shortTimeout)), f.join(Clock{})
				tt.run(t, a)
				time.Sleep(700 * time.Millisecond) // let resends and stalled replies land
				for cost := int64(100); cost >= 1; cost /= 10 {
					for {
						ok, err := b.Acquire(context.Background(), "v#tpm", cost)
						if err != nil {
							t.Fatal(err)
						}
						if !ok {
							break
						}
					}
				}
				f.verify("v#tpm", 0)
			})
		}
	}
}

// TestLostAcquireReply stalls the store's last reply to a slot's
// acquisition past the operation timeout: the store granted the lease,
// the member got ErrUnavailable, and nobody holds the slot. The member,
// which chose the lease id, releases it in the background, so the slot
// comes back within seconds, not at the lease's hour-long expiry.
func TestLostAcquireReply(t *testing.T) {
	for _, kind := range doorStores[1:] {
		t.Run(kind, func(t *testing.T) {
			f := newFleet(t, kind)
			f.bucket("v#concurrent", sluice.ConcurrentLimit(1))
			a, b := f.join(Clock{}, withOpTimeout(shortTimeout)), f.join(Clock{})
			stallAcquisition(t, f, a)
			// The slot must come back long before the lease's expiry: the
			// background release backs off to at most 5 s between attempts.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			from := time.Now()
			h, err := b.Slot(ctx, "v#concurrent", sluice.WithPolling())
			if err != nil {
				t.Fatalf("the slot did not come back: %v", err)
			}
			t.Logf("the slot came back after %s", time.Since(from).Round(time.Millisecond))
			if err := h.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// stallAcquisition makes m's acquisition of v#concurrent's only slot fail
// after the store granted it: an acquisition is one or more round trips,
// so it lets the first n replies through and stalls the rest past the
// operation timeout, for n = 0, 1, … until the store holds the lease that
// the member was told failed. A grant means fewer round trips than n (a
// failure before it cost a connection, whose set-up took replies, or a
// background release took some): it is released and n − 1 is tried.
func stallAcquisition(t *testing.T, f *fleet, m *Member) {
	t.Helper()
	ctx := context.Background()
	for n, try := 0, 0; n < 8 && try < 16; try++ {
		var mu sync.Mutex
		replies, through := 0, n
		m.Proxy.SetLatency(nil, func() time.Duration {
			mu.Lock()
			defer mu.Unlock()
			if replies++; replies > through {
				return shortTimeout + 500*time.Millisecond
			}
			return 0
		})
		res, err := m.Client.Acquire(ctx, "v#concurrent", sluice.WithTTL(time.Hour))
		m.Proxy.SetLatency(nil, nil)
		if err == nil && res.Lease == nil {
			// An earlier attempt's stalled request was applied after its
			// check: its lease holds the slot until the member releases it
			// in the background.
			t.Logf("acquire with reply %d on stalled: %v, the slot held by an earlier attempt", n+1, res.Outcome)
			time.Sleep(shortTimeout)
			continue
		}
		if err == nil {
			t.Logf("acquire with reply %d on stalled: granted", n+1)
			if err := res.Lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
			n = max(n-1, 0)
			continue
		}
		s, gerr := f.admin.GetBucket(ctx, "v#concurrent")
		if gerr != nil {
			t.Fatal(gerr)
		}
		if s.Tokens == 0 {
			t.Logf("acquire with reply %d on stalled: %v; the store granted it", n+1, err)
			return
		}
		t.Logf("acquire with reply %d on stalled: %v; nothing granted", n+1, err)
		n++
		time.Sleep(shortTimeout) // let the stalled replies drain
	}
	t.Fatal("no stalled reply left the store holding the lease")
}
