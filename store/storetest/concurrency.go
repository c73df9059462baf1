package storetest

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontopix/sluice/store"
)

// acquireRetrying acquires, retrying a store's ErrContention (a client
// would back off and retry; the suite only cares about the outcome).
func acquireRetrying(e *env, req *store.AcquireRequest, res *store.AcquireResult) error {
	for {
		err := e.s.Acquire(e.ctx, req, res)
		if !errors.Is(err, store.ErrContention) {
			return err
		}
	}
}

// testConcurrency proves there is no over-admission and no partial debit
// under concurrent callers, and that release and reconcile racing on the
// same leases restore each exactly once. The clock is fixed, so no time
// passes and no tokens are earned during a race.
func testConcurrency(t *testing.T, h Harness) {
	n := h.Goroutines
	if n <= 0 {
		n = 64
	}
	// race runs fn(g) on n goroutines released together and reports errors.
	race := func(t *testing.T, fn func(g int) error) {
		t.Helper()
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, n)
		for g := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if err := fn(g); err != nil {
					errs <- fmt.Errorf("goroutine %d: %w", g, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}

	for _, b := range []store.Bucket{rpm("hot#rpm", 100), slots("hot#concurrent", 10)} {
		t.Run("NoOverAdmission/"+b.Type.String(), func(t *testing.T) {
			e := newEnv(t, h)
			e.put(0, b)
			var granted atomic.Int64
			race(t, func(g int) error {
				var res store.AcquireResult
				for i := range 8 {
					req := &store.AcquireRequest{Now: At(0), Items: []store.Item{item(b.Name, 1)}, TTL: time.Minute,
						ID: idFor(fmt.Sprintf("%s/%d/%d", t.Name(), g, i)), Caller: "storetest"}
					if err := acquireRetrying(e, req, &res); err != nil {
						return err
					}
					if res.Granted {
						granted.Add(1)
					}
				}
				return nil
			})
			if got := granted.Load(); got != b.Capacity {
				t.Errorf("%d goroutines x 8 attempts granted %d, want exactly the capacity %d", n, got, b.Capacity)
			}
			e.wantTokens(0, b.Name, 0)
		})
	}

	t.Run("AllOrNothingUnderContention", func(t *testing.T) {
		e := newEnv(t, h)
		dims := []string{"v#a", "v#b", "v#c"}
		for _, d := range dims {
			e.put(0, rpm(d, 37))
		}
		pairs := [][2]int{{0, 1}, {1, 2}, {0, 2}}
		var spent [3]atomic.Int64
		race(t, func(g int) error {
			var res store.AcquireResult
			for i := range 12 {
				p := pairs[(g+i)%3]
				c1, c2 := int64(1+g%3), int64(1+i%2)
				req := &store.AcquireRequest{Now: At(0), TTL: time.Minute, Caller: "storetest",
					Items: []store.Item{item(dims[p[0]], c1), item(dims[p[1]], c2)},
					ID:    idFor(fmt.Sprintf("%s/%d/%d", t.Name(), g, i))}
				if err := acquireRetrying(e, req, &res); err != nil {
					return err
				}
				if res.Granted {
					spent[p[0]].Add(c1)
					spent[p[1]].Add(c2)
				}
			}
			return nil
		})
		for i, d := range dims {
			want := (37 - spent[i].Load()) * 1000
			if want < 0 {
				t.Errorf("%s: granted %d tokens, more than its capacity 37", d, spent[i].Load())
			}
			e.wantTokens(0, d, want)
		}
	})

	t.Run("ReleaseReconcileRace", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, slots("race#concurrent", int64(n)))
		e.put(0, slots("race#other", int64(n)))
		ids := make([]store.LeaseID, n)
		for i := range ids {
			r := e.req(0, item("race#concurrent", 1), item("race#other", 1))
			r.TTL = time.Second
			e.grant(r)
			ids[i] = r.ID
		}
		var released, reconciled atomic.Int64
		race(t, func(g int) error {
			if g%2 == 1 { // odd goroutines reconcile in small batches
				for {
					r, err := e.s.Reconcile(e.ctx, store.ReconcileRequest{Now: At(2000), Limit: 3})
					if err != nil && !errors.Is(err, store.ErrContention) {
						return err
					}
					reconciled.Add(int64(r.Restored))
					if r.Restored == 0 && !r.More && err == nil {
						break
					}
				}
			}
			for _, i := range []int{g, n - 1 - g} { // everybody releases two leases
				r, err := e.s.Release(e.ctx, store.ReleaseRequest{Now: At(2000), ID: ids[i]})
				if err != nil {
					return err
				}
				if r.Released {
					released.Add(1)
				}
			}
			return nil
		})
		if got := released.Load() + reconciled.Load(); got != int64(n) {
			t.Errorf("released %d + reconciled %d = %d leases, want each of the %d exactly once", released.Load(), reconciled.Load(), got, n)
		}
		for _, d := range []string{"race#concurrent", "race#other"} {
			st := e.peek(2000, d)
			if st.Tokens != int64(n)*1000 || st.ActiveLeases != 0 {
				t.Errorf("%s after the race: %d millitokens, %d leases; want %d, 0", d, st.Tokens, st.ActiveLeases, n*1000)
			}
		}
	})

	// A lease extended just before its expiry must not be reclaimed by a
	// reconciler that found it expired a moment earlier: the holder was
	// told it still holds the slot. Every lease is either extended (and
	// keeps its record) or reclaimed, never both.
	t.Run("ExtendReconcileRace", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, slots("renew#concurrent", int64(n)))
		ids := make([]store.LeaseID, n)
		for i := range ids {
			r := e.req(0, item("renew#concurrent", 1))
			r.TTL = time.Second
			e.grant(r)
			ids[i] = r.ID
		}
		extended := make([]atomic.Bool, n)
		var reconciled atomic.Int64
		race(t, func(g int) error {
			if g%4 == 1 {
				r, err := e.s.Reconcile(e.ctx, store.ReconcileRequest{Now: At(1000)})
				if err != nil && !errors.Is(err, store.ErrContention) {
					return err
				}
				reconciled.Add(int64(r.Reclaimed))
			}
			for range g { // spread the extensions over the reconcilers' run
				runtime.Gosched()
			}
			_, err := e.s.Extend(e.ctx, store.ExtendRequest{Now: At(999), ID: ids[g], TTL: time.Minute, Hint: "renew#concurrent"})
			switch {
			case err == nil:
				extended[g].Store(true)
			case !errors.Is(err, store.ErrUnknownLease):
				return err
			}
			return nil
		})
		var kept int64
		for g := range n {
			_, err := e.s.Extend(e.ctx, store.ExtendRequest{Now: At(1000), ID: ids[g], TTL: time.Minute, Hint: "renew#concurrent"})
			has := err == nil
			if extended[g].Load() && !has {
				t.Errorf("lease %d: Extend succeeded, then the reconciler reclaimed it (%v)", g, err)
			}
			if has {
				kept++
			}
		}
		st := e.peek(1000, "renew#concurrent")
		if want := (int64(n) - kept) * 1000; st.Tokens != want || int64(st.ActiveLeases) != kept {
			t.Errorf("after the race: %d millitokens and %d leases; want %d and %d (%d kept, %d reclaimed)",
				st.Tokens, st.ActiveLeases, want, kept, kept, reconciled.Load())
		}
	})
}
