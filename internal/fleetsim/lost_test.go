package fleetsim

import (
	"context"
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
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := m.Client.Wait(ctx, []sluice.Request{{Dimension: "v#tpm", Cost: 400}}, time.Minute)
				done <- err
			}()
			time.Sleep(300 * time.Millisecond) // reserved, sleeping
			m.Proxy.DropReplies(1)
			cancel()
			t.Logf("cancelled wait: %v (replies dropped: %d)", <-done, m.Proxy.Dropped())
		}},
	}
	for _, tt := range tests {
		for _, kind := range stores[1:] {
			t.Run(tt.name+"/"+kind, func(t *testing.T) {
				f := newFleet(t, kind)
				f.bucket("v#tpm", perPeriod(1000, time.Minute))
				a, b := f.join(Clock{}, sluice.WithOpTimeout(shortTimeout)), f.join(Clock{})
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
