package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/faultproxy"
	"github.com/ontopix/sluice/store"
)

// lossyStore is a store whose client reaches the standalone server through
// a fault proxy, so that a test can drop the reply to a script call after
// the server ran it: go-redis then sends the same command again.
type lossyStore struct {
	*Store
	proxy *faultproxy.Proxy
}

func newLossyStore(t *testing.T) *lossyStore {
	t.Helper()
	p, err := faultproxy.New(standalone.Addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c := redis.NewClient(&redis.Options{Addr: p.Addr()}) // MaxRetries: the default, 3
	t.Cleanup(func() { c.Close() })
	s := newStoreOn(t, c)
	for _, sc := range []*redis.Script{acquireScript, adjustScript, penalizeScript, reserveScript, cancelScript, unreserveScript, releaseScript, deleteScript} {
		if err := sc.Load(context.Background(), c).Err(); err != nil { // so that EVALSHA runs on the first send
			t.Fatal(err)
		}
	}
	return &lossyStore{Store: s, proxy: p}
}

// loseNextReply drops the reply to the next call of sc, once the server
// ran it, and returns a function reporting whether it did.
func (l *lossyStore) loseNextReply(sc *redis.Script) func() bool {
	h, n := faultproxy.DropReplyAfter([]byte(sc.Hash()), 1)
	l.proxy.SetHook(h)
	return func() bool { return n() == 1 }
}

func (l *lossyStore) tokens(t *testing.T, dim string) int64 {
	t.Helper()
	st, err := l.Peek(context.Background(), store.PeekRequest{Now: t0, Dimensions: []string{dim}})
	if err != nil {
		t.Fatal(err)
	}
	return st[0].Tokens
}

// TestResentScriptsApplyOnce loses the reply to each mutating script after
// the server ran it, so that go-redis sends the command again, and checks
// that the change was applied exactly once and the answer is the first
// one's.
func TestResentScriptsApplyOnce(t *testing.T) {
	tpm := store.Bucket{Name: "v#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1000, time.Hour)}
	ctx := context.Background()
	acquire := func(t *testing.T, s store.Store, cost int64) store.LeaseID {
		t.Helper()
		id := store.NewLeaseID()
		var r store.AcquireResult
		err := s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "v#tpm", Cost: cost}}, ID: id, TTL: time.Hour}, &r)
		if err != nil || !r.Granted {
			t.Fatalf("acquire %d: %+v, %v", cost, r, err)
		}
		return id
	}
	cases := []struct {
		name string
		sc   *redis.Script
		// run sets the bucket up (nothing lost), then does the operation
		// whose reply is lost (after arm).
		run  func(t *testing.T, s *lossyStore, arm func())
		want int64 // millitokens afterwards
	}{
		{"settle 500 to 300", adjustScript, func(t *testing.T, s *lossyStore, arm func()) {
			id := acquire(t, s, 500)
			arm()
			res, err := s.Adjust(ctx, store.AdjustRequest{Now: t0, ID: id, Dimension: "v#tpm", Delta: -200, Held: 500, ExpiresAt: t0.Add(time.Hour)})
			if want := (store.Settlement{Held: 300, Applied: -200_000, Remaining: 700_000}); err != nil || res != want {
				t.Errorf("Adjust = %+v, %v; want %+v", res, err, want)
			}
		}, 700_000},
		{"penalize by half", penalizeScript, func(t *testing.T, s *lossyStore, arm func()) {
			arm()
			res, err := s.Penalize(ctx, store.PenalizeRequest{Now: t0, Dimension: "v#tpm", FactorMilli: 500})
			if want := (store.Penalty{Before: 1_000_000, After: 500_000}); err != nil || res != want {
				t.Errorf("Penalize = %+v, %v; want %+v", res, err, want)
			}
		}, 500_000},
		{"unrecorded acquire of 300", acquireScript, func(t *testing.T, s *lossyStore, arm func()) {
			arm()
			acquire(t, s, 300)
		}, 700_000},
		{"unrecorded reserve of 300", reserveScript, func(t *testing.T, s *lossyStore, arm func()) {
			arm()
			var r store.ReserveResult
			err := s.Reserve(ctx, &store.ReserveRequest{Now: t0, Items: []store.Item{{Dimension: "v#tpm", Cost: 300}}, ID: store.NewLeaseID(), TTL: time.Hour, MaxWait: time.Hour}, &r)
			if err != nil || !r.Granted || r.Items[0].Remaining != 700_000 {
				t.Errorf("Reserve = %+v, %v; want granted with 700000 left", r, err)
			}
		}, 700_000},
		{"unrecorded cancel of 400", unreserveScript, func(t *testing.T, s *lossyStore, arm func()) {
			acquire(t, s, 1000)
			var r store.ReserveResult
			id := store.NewLeaseID()
			err := s.Reserve(ctx, &store.ReserveRequest{Now: t0, Items: []store.Item{{Dimension: "v#tpm", Cost: 400}}, ID: id, TTL: time.Hour, MaxWait: time.Hour}, &r)
			if err != nil || !r.Granted {
				t.Fatalf("reserve: %+v, %v", r, err)
			}
			arm()
			res, err := s.Cancel(ctx, store.CancelRequest{Now: t0, ID: id, Items: []store.Item{{Dimension: "v#tpm", Cost: 400}}, ValidAt: r.ValidAt})
			want := store.CancelResult{Cancelled: true, Returned: []store.Returned{{Dimension: "v#tpm", Amount: 400_000}}}
			if err != nil || !res.Cancelled || len(res.Returned) != 1 || res.Returned[0] != want.Returned[0] {
				t.Errorf("Cancel = %+v, %v; want %+v", res, err, want)
			}
		}, 0},
		{"recorded cancel of 400", cancelScript, func(t *testing.T, s *lossyStore, arm func()) {
			acquire(t, s, 1000)
			var r store.ReserveResult
			id := store.NewLeaseID()
			err := s.Reserve(ctx, &store.ReserveRequest{Now: t0, Items: []store.Item{{Dimension: "v#tpm", Cost: 400}}, ID: id, TTL: time.Hour, MaxWait: time.Hour, Record: true}, &r)
			if err != nil || !r.Granted {
				t.Fatalf("reserve: %+v, %v", r, err)
			}
			arm()
			res, err := s.Cancel(ctx, store.CancelRequest{Now: t0, ID: id, Recorded: true, Hint: "v#tpm"})
			want := store.CancelResult{Cancelled: true, Returned: []store.Returned{{Dimension: "v#tpm", Amount: 400_000}}}
			if err != nil || !res.Cancelled || len(res.Returned) != 1 || res.Returned[0] != want.Returned[0] {
				t.Errorf("Cancel = %+v, %v; want %+v (the answer of the call that cancelled)", res, err, want)
			}
		}, 0},
		{"release of a recorded lease", releaseScript, func(t *testing.T, s *lossyStore, arm func()) {
			id := store.NewLeaseID()
			var r store.AcquireResult
			err := s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "v#tpm", Cost: 400}}, ID: id, TTL: time.Hour, Record: true}, &r)
			if err != nil || !r.Granted {
				t.Fatalf("acquire: %+v, %v", r, err)
			}
			arm()
			res, err := s.Release(ctx, store.ReleaseRequest{Now: t0, ID: id, Hint: "v#tpm"})
			if err != nil || !res.Released {
				t.Errorf("Release = %+v, %v; want released (the answer of the call that released)", res, err)
			}
		}, 600_000},
		{"delete bucket", deleteScript, func(t *testing.T, s *lossyStore, arm func()) {
			put(t, s, t0, store.Bucket{Name: "v#gone", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)})
			arm()
			if err := s.DeleteBucket(ctx, store.DeleteBucketRequest{Name: "v#gone"}); err != nil {
				t.Errorf("DeleteBucket = %v, want nil (the answer of the call that deleted it)", err)
			}
		}, 1_000_000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newLossyStore(t)
			put(t, s, t0, tpm)
			var lost func() bool
			tc.run(t, s, func() { lost = s.loseNextReply(tc.sc) })
			if lost == nil || !lost() {
				t.Fatal("no reply was lost: the test did not exercise a resend")
			}
			if got := s.tokens(t, "v#tpm"); got != tc.want {
				t.Errorf("balance after a resent %s: %d millitokens, want %d", tc.name, got, tc.want)
			}
		})
	}
}

// TestResentClientCallsApplyOnce is TestResentScriptsApplyOnce through the
// Client: a settlement and a penalty whose replies are lost.
func TestResentClientCallsApplyOnce(t *testing.T) {
	ctx := context.Background()
	s := newLossyStore(t)
	c, err := sluice.New(s)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := s.PutBucket(ctx, store.PutBucketRequest{Now: now, Bucket: store.Bucket{Name: "v#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1000, 24*time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	balance := func() int64 {
		t.Helper()
		st, err := c.Peek(ctx, "v#tpm")
		if err != nil {
			t.Fatal(err)
		}
		return int64(st[0].Tokens) / 1000 // refill in a test's time is below a token
	}
	r, err := c.Acquire(ctx, "v#tpm", sluice.WithCost(500))
	if err != nil || r.Outcome != sluice.Granted {
		t.Fatalf("acquire: %+v, %v", r, err)
	}
	lost := s.loseNextReply(adjustScript)
	if _, err := r.Lease.Settle(ctx, "v#tpm", 300); err != nil {
		t.Fatal(err)
	}
	if !lost() {
		t.Fatal("no reply was lost")
	}
	if got := balance(); got != 700 {
		t.Errorf("after settling 500 to 300 with the reply lost: %d tokens, want 700", got)
	}
	lost = s.loseNextReply(penalizeScript)
	p, err := c.Penalize(ctx, "v#tpm", 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if !lost() {
		t.Fatal("no reply was lost")
	}
	if got := balance(); got != 350 || p.Before/1000 != 700 {
		t.Errorf("after a ×0.5 penalty with the reply lost: %d tokens (penalty %+v), want 350 from 700", got, p)
	}
	lost = s.loseNextReply(acquireScript)
	if r, err := c.Acquire(ctx, "v#tpm", sluice.WithCost(100)); err != nil || r.Outcome != sluice.Granted {
		t.Fatalf("acquire: %+v, %v", r, err)
	}
	if !lost() {
		t.Fatal("no reply was lost")
	}
	if got := balance(); got != 250 {
		t.Errorf("after an acquisition of 100 with the reply lost: %d tokens, want 250", got)
	}
	r, err = c.Acquire(ctx, "v#tpm", sluice.WithCost(50), sluice.WithRecord())
	if err != nil || r.Outcome != sluice.Granted {
		t.Fatalf("acquire: %+v, %v", r, err)
	}
	lost = s.loseNextReply(releaseScript)
	if err := r.Lease.Release(ctx); err != nil {
		t.Errorf("Release with its reply lost: %v, want nil (the lease was released, once)", err)
	}
	if !lost() {
		t.Fatal("no reply was lost")
	}
}

// TestResentAfterAnotherWriter loses the reply to a script after the server
// ran it and lets another client write the same bucket before go-redis
// sends the command again: the resend must not apply the change a second
// time on top of the other client's write.
func TestResentAfterAnotherWriter(t *testing.T) {
	ctx := context.Background()
	tpm := store.Bucket{Name: "v#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1000, time.Hour)}
	cases := []struct {
		name string
		sc   *redis.Script
		op   func(t *testing.T, s *lossyStore)
		want int64 // millitokens: the operation once, then the other client's 100 tokens
	}{
		{"reset to full", putScript, func(t *testing.T, s *lossyStore) {
			if err := s.PutBucket(ctx, store.PutBucketRequest{Now: t0, Bucket: tpm, Reset: true}); err != nil {
				t.Fatal(err)
			}
		}, 900_000},
		{"penalize by half", penalizeScript, func(t *testing.T, s *lossyStore) {
			if _, err := s.Penalize(ctx, store.PenalizeRequest{Now: t0, Dimension: "v#tpm", FactorMilli: 500}); err != nil {
				t.Fatal(err)
			}
		}, 150_000},
		// The acquisition claims its op key before writing (opclaim.lua):
		// a resend that finds the balance still covering it must not take
		// it again, and one that finds no balance left must still answer
		// with the grant it made.
		{"unrecorded acquire of 200", acquireScript, func(t *testing.T, s *lossyStore) {
			var r store.AcquireResult
			err := s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "v#tpm", Cost: 200}}, ID: store.NewLeaseID(), TTL: time.Hour}, &r)
			if err != nil || !r.Granted || r.Items[0].Remaining != 300_000 {
				t.Errorf("Acquire = %+v, %v; want granted with 300000 left", r, err)
			}
		}, 200_000},
		{"unrecorded acquire of 400 resent without balance", acquireScript, func(t *testing.T, s *lossyStore) {
			var r store.AcquireResult
			err := s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "v#tpm", Cost: 400}}, ID: store.NewLeaseID(), TTL: time.Hour}, &r)
			if err != nil || !r.Granted || r.Items[0].Remaining != 100_000 {
				t.Errorf("Acquire = %+v, %v; want the grant it made, with 100000 left", r, err)
			}
		}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newLossyStore(t)
			if err := putScript.Load(ctx, s.rdb).Err(); err != nil {
				t.Fatal(err)
			}
			other := newStoreOn(t, newClient(t), WithPrefix(s.prefix))
			put(t, s, t0, tpm)
			var r store.AcquireResult
			if err := s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "v#tpm", Cost: 500}}, ID: store.NewLeaseID(), TTL: time.Hour}, &r); err != nil || !r.Granted {
				t.Fatalf("acquire: %+v, %v", r, err)
			}
			drop, dropped := faultproxy.DropReplyAfter([]byte(tc.sc.Hash()), 1)
			s.proxy.SetHook(func(conn int, dir faultproxy.Dir, chunk []byte) faultproxy.Verdict {
				v := drop(conn, dir, chunk)
				if v.Drop { // the script ran: another client writes before the resend
					var r store.AcquireResult
					if err := other.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "v#tpm", Cost: 100}}, ID: store.NewLeaseID(), TTL: time.Hour}, &r); err != nil || !r.Granted {
						t.Errorf("the other client's acquire: %+v, %v", r, err)
					}
				}
				return v
			})
			tc.op(t, s)
			if dropped() != 1 {
				t.Fatal("no reply was lost")
			}
			if got := s.tokens(t, "v#tpm"); got != tc.want {
				t.Errorf("after a resent %s with another write in between: %d millitokens, want %d", tc.name, got, tc.want)
			}
		})
	}
}
