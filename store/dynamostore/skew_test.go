package dynamostore

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// TestClockSkew pins the store's answer to callers whose clocks disagree
// (the decisions use the caller's clock): a host an hour ahead drains a
// bucket; a host on time is then refused until its clock is within the
// maximum skew of the bucket's refill timestamp, which never moves back,
// and told how far behind it is; a host 10 ms behind the last write gets
// the same wait as a host on time.
func TestClockSkew(t *testing.T) {
	rpm := store.Bucket{Name: "skew#rpm", Config: bucket.PerPeriod(bucket.Requests, 60, time.Minute)}
	tests := []struct {
		name      string
		drainAt   time.Duration // the draining host's clock, from t0
		askAt     time.Duration // the asking host's clock
		wantRetry time.Duration
		behind    time.Duration
	}{
		{"host 1 h ahead, then a host on time", time.Hour, 0, time.Hour - time.Second, time.Hour},
		{"host on time, then a host 10 ms behind", 0, -10 * time.Millisecond, time.Second, 0},
		{"host on time, then a host 2 s behind (beyond the 1 s maximum skew)", 0, -2 * time.Second, time.Second, 2 * time.Second},
	}
	for _, tt := range tests {
		for _, readFirst := range []bool{false, true} {
			t.Run(tt.name+map[bool]string{false: "", true: ", read-then-transact path"}[readFirst], func(t *testing.T) {
				var opts []Option
				if readFirst {
					opts = append(opts, WithReadThenTransact())
				}
				s := newStore(t, opts...)
				put(t, s, t0.Add(-time.Minute), rpm)
				var res store.AcquireResult
				if err := s.Acquire(context.Background(), &store.AcquireRequest{Now: t0.Add(tt.drainAt), Items: []store.Item{{Dimension: rpm.Name, Cost: 60}}, ID: store.NewLeaseID(), TTL: time.Minute}, &res); err != nil || !res.Granted {
					t.Fatalf("drain = %+v, %v", res, err)
				}
				err := s.Acquire(context.Background(), &store.AcquireRequest{Now: t0.Add(tt.askAt), Items: []store.Item{{Dimension: rpm.Name}}, ID: store.NewLeaseID(), TTL: time.Minute}, &res)
				if err != nil || res.Granted || res.RetryIn != tt.wantRetry || res.Behind != tt.behind {
					t.Errorf("ask = %+v, %v; want RETRY_IN %v, Behind %v", res, err, tt.wantRetry, tt.behind)
				}
			})
		}
	}
	if _, err := New(newClient(), "sluice-x", WithMaxSkew(2*time.Hour)); err == nil {
		t.Error("WithMaxSkew(2h) accepted; want an error naming max_skew")
	}
}

// TestClockSkewShare measures, without asserting, how a busy bucket is
// shared between a host on time and a host whose clock is 10 ms behind,
// each waiting out RETRY_IN (Wait), over three seconds;
// docs/reliability-ddb.md reports the figures.
func TestClockSkewShare(t *testing.T) {
	db := newClient()
	table := newTable(t, db)
	put(t, openStore(t, db, table), time.Now(), store.Bucket{Name: "skew#rps", Config: bucket.PerPeriod(bucket.Requests, 10, 200*time.Millisecond)})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var counts [2]atomic.Int64
	var wg sync.WaitGroup
	for h, lag := range []time.Duration{0, 10 * time.Millisecond} {
		c, err := sluice.New(openStore(t, newClient(), table), sluice.WithClock(sluice.ClockFunc(func() time.Time { return time.Now().Add(-lag) })))
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					wctx, cancel := context.WithTimeout(ctx, time.Second)
					if _, err := c.Wait(wctx, []sluice.Request{{Dimension: "skew#rps", Cost: 1}}); err == nil {
						counts[h].Add(1)
					}
					cancel()
				}
			}()
		}
	}
	wg.Wait()
	t.Logf("3 s on a bucket of 10 per 200 ms: host on time %d grants, host 10 ms behind %d grants", counts[0].Load(), counts[1].Load())
}
