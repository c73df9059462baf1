package storetest

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// testConditionalPut covers PutBucketRequest.IfAbsent and IfMatch: a
// failed condition is a *ConflictError and changes nothing.
func testConditionalPut(t *testing.T, h Harness) {
	cfg := func(b store.Bucket) *bucket.Config { return &b.Config }
	same := rpm("x#rpm", 100) // the same effective configuration, spelled out
	same.CostPerCall, same.MaxDebt = 1, 100
	tests := []struct {
		name     string
		exists   bool // x#rpm exists, 70 of its 100 tokens spent at +0
		req      store.PutBucketRequest
		wantErr  error
		wantFind bool // the conflict reports a bucket found
		tokens   int64
		config   store.Bucket
	}{
		{"if absent creates a missing bucket full", false,
			store.PutBucketRequest{Bucket: rpm("x#rpm", 100), IfAbsent: true}, nil, false, 100_000, rpm("x#rpm", 100)},
		{"if absent leaves an existing bucket alone", true,
			store.PutBucketRequest{Bucket: rpm("x#rpm", 100), IfAbsent: true}, store.ErrConflict, true, 30_000, rpm("x#rpm", 100)},
		{"if absent with reset leaves an existing bucket alone", true,
			store.PutBucketRequest{Bucket: rpm("x#rpm", 50), IfAbsent: true, Reset: true}, store.ErrConflict, true, 30_000, rpm("x#rpm", 100)},
		{"if match applies to the configuration read", true,
			store.PutBucketRequest{Bucket: rpm("x#rpm", 50), IfMatch: cfg(rpm("x#rpm", 100))}, nil, false, 30_000, rpm("x#rpm", 50)},
		{"if match compares effective configurations", true,
			store.PutBucketRequest{Bucket: rpm("x#rpm", 50), IfMatch: cfg(same)}, nil, false, 30_000, rpm("x#rpm", 50)},
		{"if match with reset fills", true,
			store.PutBucketRequest{Bucket: rpm("x#rpm", 50), IfMatch: cfg(rpm("x#rpm", 100)), Reset: true}, nil, false, 50_000, rpm("x#rpm", 50)},
		{"if match refuses a changed configuration", true,
			store.PutBucketRequest{Bucket: rpm("x#rpm", 50), IfMatch: cfg(rpm("x#rpm", 200))}, store.ErrConflict, true, 30_000, rpm("x#rpm", 100)},
		{"if match refuses a missing bucket", false,
			store.PutBucketRequest{Bucket: rpm("x#rpm", 50), IfMatch: cfg(rpm("x#rpm", 100))}, store.ErrConflict, false, 0, store.Bucket{}},
		{"if absent empty creates a missing bucket with nothing", false,
			store.PutBucketRequest{Bucket: rpm("x#rpm", 100), IfAbsent: true, Empty: true}, nil, false, 0, rpm("x#rpm", 100)},
		{"empty creates a missing bucket with nothing", false,
			store.PutBucketRequest{Bucket: rpm("x#rpm", 100), Empty: true}, nil, false, 0, rpm("x#rpm", 100)},
		{"empty keeps an existing bucket's balance", true,
			store.PutBucketRequest{Bucket: rpm("x#rpm", 100), Empty: true}, nil, false, 30_000, rpm("x#rpm", 100)},
		{"if absent empty leaves an existing bucket alone", true,
			store.PutBucketRequest{Bucket: rpm("x#rpm", 50), IfAbsent: true, Empty: true}, store.ErrConflict, true, 30_000, rpm("x#rpm", 100)},
		{"if absent and if match together are invalid", true,
			store.PutBucketRequest{Bucket: rpm("x#rpm", 50), IfAbsent: true, IfMatch: cfg(rpm("x#rpm", 100))}, store.ErrInvalid, false, 30_000, rpm("x#rpm", 100)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, h)
			if tt.exists {
				e.put(0, rpm("x#rpm", 100))
				e.grant(e.req(0, item("x#rpm", 70)))
			}
			req := tt.req
			req.Now = At(0)
			err := e.s.PutBucket(e.ctx, req)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("PutBucket = %v, want %v", err, tt.wantErr)
			}
			var ce *store.ConflictError
			if errors.As(err, &ce) && (ce.Found != tt.wantFind || ce.Dimension != "x#rpm") {
				t.Errorf("conflict = %+v, want dimension x#rpm, found %t", ce, tt.wantFind)
			}
			if tt.config.Name == "" {
				bs, err := e.s.ListBuckets(e.ctx, store.ListBucketsRequest{Now: At(0)})
				if err != nil || len(bs) != 0 {
					t.Errorf("ListBuckets = %+v, %v; want none", bs, err)
				}
				return
			}
			st := e.peek(0, "x#rpm")
			if st.Tokens != tt.tokens || st.Bucket != tt.config {
				t.Errorf("after PutBucket: %+v; want config %+v, %d millitokens", st, tt.config, tt.tokens)
			}
		})
	}

	t.Run("EmptyEarnsFromNow", func(t *testing.T) { testEmptyPut(t, h) })
	t.Run("ConcurrentApplyNeverRefills", func(t *testing.T) { testConcurrentApply(t, h) })
	t.Run("RecreateAfterLoss", func(t *testing.T) { testRecreateAfterLoss(t, h) })
}

// testRecreateAfterLoss is what clients with declared buckets do when the
// store lost one (as a store restarted empty does): every caller that
// finds it missing creates it if absent and retries. Exactly one creation
// succeeds, and the grants are exactly the capacity (the clock is fixed):
// no caller refills the bucket another re-created and spent from.
func testRecreateAfterLoss(t *testing.T, h Harness) {
	n := h.Goroutines
	if n <= 0 {
		n = 64
	}
	b := rpm("lost#rpm", 9)
	e := newEnv(t, h)
	e.put(0, b)
	e.grant(e.req(0, item(b.Name, 4)))
	if err := e.s.DeleteBucket(e.ctx, store.DeleteBucketRequest{Name: b.Name}); err != nil {
		t.Fatal(err)
	}
	var created, granted atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, n)
	for g := range n {
		wg.Go(func() {
			<-start
			var res store.AcquireResult
			for i := range 2 {
				req := &store.AcquireRequest{Now: At(0), Items: []store.Item{item(b.Name, 1)}, TTL: time.Minute,
					ID: idFor(fmt.Sprintf("%s/%d/%d", t.Name(), g, i)), Caller: "storetest"}
				err := acquireRetrying(e, req, &res)
				for try := 0; errors.Is(err, store.ErrUnknownDimension) && try < 100; try++ {
					perr := e.s.PutBucket(e.ctx, store.PutBucketRequest{Now: At(0), Bucket: b, IfAbsent: true})
					switch {
					case perr == nil:
						created.Add(1)
					case !errors.Is(perr, store.ErrConflict) && !errors.Is(perr, store.ErrContention):
						errs <- fmt.Errorf("goroutine %d: re-create: %w", g, perr)
						return
					}
					err = acquireRetrying(e, req, &res)
				}
				if err != nil {
					errs <- fmt.Errorf("goroutine %d: %w", g, err)
					return
				}
				if res.Granted {
					granted.Add(1)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := created.Load(); got != 1 {
		t.Errorf("%d goroutines re-created the lost bucket %d times, want exactly once", n, got)
	}
	if got := granted.Load(); got != b.Capacity {
		t.Errorf("%d grants from the re-created bucket with a fixed clock, want its capacity %d", got, b.Capacity)
	}
}

// testConcurrentApply runs appliers that bring the store in line with the
// same limits the way limits.Apply does (list, then create if absent or
// change if the configuration is still the one read), several times each,
// while spenders acquire as soon as the buckets exist. The clock is fixed,
// so nothing refills: whatever the interleaving, the grants must not
// exceed the capacity, which a creation that refilled a bucket another
// applier created and spenders drew from would break.
func testConcurrentApply(t *testing.T, h Harness) {
	n := h.Goroutines
	if n <= 0 {
		n = 64
	}
	appliers, spenders := max(2, n/8), max(2, n-n/8)
	limits := []store.Bucket{rpm("fleet#rpm", 9), slots("fleet#concurrent", 5)}
	for round := range 3 {
		e := newEnv(t, h)
		var granted [2]atomic.Int64
		var created atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, appliers+spenders)
		for a := range appliers {
			wg.Go(func() {
				<-start
				for range 4 {
					c, err := applyOnce(e, limits)
					if err != nil {
						errs <- fmt.Errorf("applier %d: %w", a, err)
						return
					}
					created.Add(int64(c))
				}
			})
		}
		for g := range spenders {
			wg.Go(func() {
				<-start
				var res store.AcquireResult
				d := g % len(limits)
				for i, done := 0, 0; done < 6; i++ {
					req := &store.AcquireRequest{Now: At(0), Items: []store.Item{item(limits[d].Name, 1)}, TTL: time.Minute,
						ID: idFor(fmt.Sprintf("%s/%d/%d/%d", t.Name(), round, g, i)), Caller: "storetest"}
					err := acquireRetrying(e, req, &res)
					if errors.Is(err, store.ErrUnknownDimension) && i < 100_000 {
						runtime.Gosched() // not created yet
						continue
					}
					if err != nil {
						errs <- fmt.Errorf("spender %d: %w", g, err)
						return
					}
					done++
					if res.Granted {
						granted[d].Add(1)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		for d, b := range limits {
			if got := granted[d].Load(); got > b.Capacity {
				t.Errorf("round %d: %s granted %d with a fixed clock, want at most its capacity %d (%d appliers, %d spenders)",
					round, b.Name, got, b.Capacity, appliers, spenders)
			}
		}
		if got := created.Load(); got != int64(len(limits)) {
			t.Errorf("round %d: %d creations succeeded, want exactly one per bucket (%d)", round, got, len(limits))
		}
	}
}

// applyOnce brings the store in line with limits as limits.Apply does and
// returns the number of buckets it created: a missing bucket is created
// only if still absent, a different one changed only if its configuration
// is still the one read; a conflict re-reads.
func applyOnce(e *env, limits []store.Bucket) (int, error) {
	created := 0
	for attempt := 0; ; attempt++ {
		bs, err := e.s.ListBuckets(e.ctx, store.ListBucketsRequest{Now: At(0)})
		if err != nil {
			return created, err
		}
		cur := map[string]bucket.Config{}
		for _, b := range bs {
			cur[b.Name] = b.Config
		}
		runtime.Gosched() // the time a reply takes to come back
		conflict := false
		for _, b := range limits {
			c, ok := cur[b.Name]
			req := store.PutBucketRequest{Now: At(0), Bucket: b}
			switch {
			case !ok:
				// As limits.Apply plans a creation: full. Reset is what
				// a store ignoring IfAbsent would apply to a bucket
				// created in between.
				req.IfAbsent, req.Reset = true, true
			case store.SameConfig(c, b.Config):
				continue
			default:
				req.IfMatch = &c
			}
			err := e.s.PutBucket(e.ctx, req)
			switch {
			case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrContention):
				conflict = true
			case err != nil:
				return created, err
			case req.IfAbsent:
				created++
			}
		}
		if !conflict {
			return created, nil
		}
		if attempt > 100 {
			return created, errors.New("still conflicting after 100 re-reads")
		}
	}
}

// testEmptyPut covers PutBucketRequest.Empty on creation: a time-based
// bucket starts with nothing and its refill timestamp at the request's
// time, so that it admits only what it earns from then on; a concurrent
// bucket starts with all its slots free.
func testEmptyPut(t *testing.T, h Harness) {
	tests := []struct {
		name   string
		b      store.Bucket
		peekMs int64 // the request is at +1000 ms
		tokens int64
	}{
		{"time-based at creation", rpm("e#rpm", 100), 1_000, 0},
		{"time-based half a period later", rpm("e#rpm", 100), 31_000, 50_000},
		{"time-based a period later", rpm("e#rpm", 100), 61_000, 100_000},
		{"concurrent starts free", slots("e#concurrent", 3), 1_000, 3_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, h)
			err := e.s.PutBucket(e.ctx, store.PutBucketRequest{Now: At(1_000), Bucket: tt.b, IfAbsent: true, Empty: true})
			if err != nil {
				t.Fatalf("PutBucket: %v", err)
			}
			if got := e.tokens(tt.peekMs, tt.b.Name); got != tt.tokens {
				t.Errorf("tokens at +%dms = %d millitokens, want %d", tt.peekMs, got, tt.tokens)
			}
		})
	}
	t.Run("time-based denies at creation", func(t *testing.T) {
		e := newEnv(t, h)
		b := rpm("e#rpm", 100)
		if err := e.s.PutBucket(e.ctx, store.PutBucketRequest{Now: At(1_000), Bucket: b, IfAbsent: true, Empty: true}); err != nil {
			t.Fatalf("PutBucket: %v", err)
		}
		if res := e.acquire(e.req(1_000, item(b.Name, 1))); res.Granted {
			t.Errorf("Acquire(1) right after an empty creation granted, want denied")
		}
		e.grant(e.req(1_600, item(b.Name, 1)))
	})
}
