package redisstore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/redistest"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/storetest"
)

// failoverBuckets are the buckets of the failover tests: capacity enough
// that no acquisition is ever denied, on a fixed caller clock (no refill).
var failoverBuckets = []store.Bucket{
	{Name: "fo#concurrent", Config: bucket.ConcurrentSlots(1_000_000)},
	{Name: "fo#tpm", Config: bucket.PerPeriod(bucket.Tokens, 100_000_000, time.Minute)},
}

// failoverItems is one acquisition: a slot and 10 tokens.
var failoverItems = []store.Item{{Dimension: "fo#concurrent", Cost: 1}, {Dimension: "fo#tpm", Cost: 10}}

// failoverLoad acquires from 8 goroutines until stop is closed and returns
// the ids of the grants it was told about, and how many acquisitions failed
// with ErrUnavailable.
func failoverLoad(t *testing.T, s *Store, stop <-chan struct{}) (acked map[store.LeaseID]bool, unavailable int) {
	var mu sync.Mutex
	acked = map[store.LeaseID]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				req := &store.AcquireRequest{Now: t0, Items: failoverItems, ID: store.NewLeaseID(), TTL: time.Hour}
				var res store.AcquireResult
				err := s.Acquire(context.Background(), req, &res)
				mu.Lock()
				switch {
				case err == nil && res.Granted:
					acked[req.ID] = true
				case errors.Is(err, store.ErrUnavailable):
					unavailable++
				default:
					t.Errorf("acquire: %+v %v", res, err)
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(time.Millisecond) // back off from a failing store
				}
			}
		}()
	}
	wg.Wait()
	return acked, unavailable
}

// failoverResult is what a promoted replica lost.
type failoverResult struct {
	acked, lost, unavailable int
	overTokens               int64 // tokens acknowledged but not debited on the replica
}

// runFailover starts a master and a replica, loads acquisitions through a
// store on the master, cuts the replica off (SIGSTOP, and the master drops
// its link: the replica lags) while the load goes on for lag, SIGKILLs the
// master, resumes and promotes the replica (REPLICAOF NO ONE), and points a
// store at it: the grants acknowledged but absent there are lost. With lag
// 0 the master is killed under load with the replica connected.
func runFailover(t *testing.T, lag time.Duration, opts ...Option) failoverResult {
	m, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	r, err := redistest.StartReplica(m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	c := redis.NewClient(&redis.Options{Addr: m.Addr, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	s := newStoreOn(t, c, append([]Option{WithTimeout(500 * time.Millisecond)}, opts...)...)
	setup := newStoreOn(t, c, WithPrefix(s.prefix)) // no replica ack: the set-up never times out
	for _, b := range failoverBuckets {
		put(t, setup, t0, b)
	}
	// The buckets are on the replica before the load starts.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if n, err := r.Do("EXISTS", s.prefix+"{fo}#concurrent", s.prefix+"{fo}#tpm"); err == nil && n == "2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the buckets did not reach the replica within 10s")
		}
		time.Sleep(10 * time.Millisecond) // polling for replication
	}
	stop := make(chan struct{})
	var res failoverResult
	var acked map[store.LeaseID]bool
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		var u int
		acked, u = failoverLoad(t, s, stop)
		res.unavailable = u
	}()
	time.Sleep(100 * time.Millisecond) // load with the replica in sync
	if lag > 0 {
		if err := r.Stop(); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Do("CLIENT", "KILL", "TYPE", "replica"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(lag) // load with the replica cut off
	}
	_ = m.Kill() // SIGKILL under load
	close(stop)
	<-loaded
	if lag > 0 {
		if err := r.Cont(); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Promote(); err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { rc.Close() })
	promoted := newStoreOn(t, rc, WithPrefix(s.prefix))
	ctx := context.Background()
	ls, err := promoted.Leases(ctx, store.LeaseQuery{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	there := map[store.LeaseID]bool{}
	for _, l := range ls {
		there[l.ID] = true
	}
	for id := range acked {
		if !there[id] {
			res.lost++
		}
	}
	res.acked = len(acked)
	st, err := promoted.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{"fo#concurrent", "fo#tpm"}})
	if err != nil {
		t.Fatal(err)
	}
	if held := int64(1_000_000) - st[0].Tokens/1000; held != int64(len(ls)) {
		t.Errorf("promoted replica: %d slots taken, %d lease records", held, len(ls))
	}
	res.overTokens = 10*int64(len(acked)) - (100_000_000 - st[1].Tokens/1000)
	// The promoted replica serves the fleet.
	if g := acquire(t, promoted, t0, failoverItems...); !g.Granted {
		t.Errorf("acquisition on the promoted replica: %+v", g)
	}
	return res
}

// TestReplicaFailover measures what a failover to an asynchronous replica
// loses: grants acknowledged to callers but absent on the promoted replica,
// whose slots and tokens it then grants again (over-admission). Without
// WithReplicaAck the grants made while the replica lagged are lost; with
// it, those acquisitions fail with ErrUnavailable instead and no
// acknowledged grant is lost. The figures are logged for
// docs/reliability-redis.md.
func TestReplicaFailover(t *testing.T) {
	const lag = 200 * time.Millisecond
	t.Run("async", func(t *testing.T) {
		r := runFailover(t, lag)
		t.Logf("replica cut off for %v: %d grants acknowledged, %d lost (over-admission: %d slots, %d tokens), %d unavailable",
			lag, r.acked, r.lost, r.lost, r.overTokens, r.unavailable)
		if r.lost == 0 || r.overTokens != 10*int64(r.lost) {
			t.Errorf("lost %d grants, %d tokens: the grants of a lagging replica's master should be lost", r.lost, r.overTokens)
		}
	})
	t.Run("async, no lag", func(t *testing.T) {
		r := runFailover(t, 0)
		t.Logf("master SIGKILLed under load, replica in sync: %d grants acknowledged, %d lost (%d tokens over-admitted)",
			r.acked, r.lost, r.overTokens)
	})
	t.Run("replica ack", func(t *testing.T) {
		r := runFailover(t, lag, WithReplicaAck(1, 100*time.Millisecond))
		t.Logf("WithReplicaAck(1, 100ms), replica cut off for %v: %d grants acknowledged, %d lost, %d unavailable",
			lag, r.acked, r.lost, r.unavailable)
		if r.lost != 0 || r.overTokens > 0 {
			t.Errorf("with replica ack: %d acknowledged grants lost, %d tokens over-admitted", r.lost, r.overTokens)
		}
		if r.unavailable == 0 || r.acked == 0 {
			t.Errorf("%d acknowledged, %d unavailable: want grants before the cut and failures after", r.acked, r.unavailable)
		}
	})
}

// TestConformanceReplicaAck runs the shared suite on a master with one
// replica and WithReplicaAck(1, …), so that every write goes through the
// WAIT pipeline.
func TestConformanceReplicaAck(t *testing.T) {
	m, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	r, err := redistest.StartReplica(m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	c := redis.NewClient(&redis.Options{Addr: m.Addr})
	t.Cleanup(func() { c.Close() })
	storetest.Run(t, storetest.Harness{
		NewStore:       func(tb testing.TB) store.Store { return newStoreOn(tb, c, WithReplicaAck(1, time.Second)) },
		Goroutines:     16,
		ModelSequences: variantSequences,
	})
}
