package dynamostore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// TestLeaseIDReuse reuses a held lease id on both paths and from another
// store handle: for other dimensions (no item in common, which the lease
// items' own conditions cannot see) or other costs it fails with
// ErrLeaseInUse and changes nothing; the same request is answered as the
// grant it was; and one Release frees the lease whole. A reuse used to
// create a second lease with the same id, of which Release freed one.
func TestLeaseIDReuse(t *testing.T) {
	for _, readFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "fast", true: "readfirst"}[readFirst], func(t *testing.T) {
			var opts []Option
			if readFirst {
				opts = append(opts, WithReadThenTransact())
			}
			db := newClient()
			table := newTable(t, db)
			s := openStore(t, db, table, opts...)
			other := openStore(t, newClient(), table, opts...)
			ctx := context.Background()
			put(t, s, t0, store.Bucket{Name: "a#concurrent", Config: bucket.ConcurrentSlots(5)})
			put(t, s, t0, store.Bucket{Name: "b#concurrent", Config: bucket.ConcurrentSlots(5)})
			put(t, s, t0, store.Bucket{Name: "b#rpm", Config: bucket.PerPeriod(bucket.Requests, 100, time.Minute)})
			id := acquireAt(t, s, t0, time.Minute, false, store.Item{Dimension: "a#concurrent", Cost: 2})

			tests := []struct {
				name  string
				st    *Store
				items []store.Item
				rec   bool
				want  error // nil: the grant it was
			}{
				{"other dimension", s, []store.Item{{Dimension: "b#concurrent"}}, false, store.ErrLeaseInUse},
				{"other dimension, other handle", other, []store.Item{{Dimension: "b#concurrent"}}, false, store.ErrLeaseInUse},
				{"recorded requests dimension", other, []store.Item{{Dimension: "b#rpm"}}, true, store.ErrLeaseInUse},
				{"other cost", other, []store.Item{{Dimension: "a#concurrent", Cost: 1}}, false, store.ErrLeaseInUse},
				{"one more dimension", s, []store.Item{{Dimension: "a#concurrent", Cost: 2}, {Dimension: "b#concurrent"}}, false, store.ErrLeaseInUse},
				{"retry", other, []store.Item{{Dimension: "a#concurrent", Cost: 2}}, false, nil},
			}
			for _, tt := range tests {
				var res store.AcquireResult
				err := tt.st.Acquire(ctx, &store.AcquireRequest{Now: t0.Add(time.Second), Items: tt.items, ID: id, TTL: time.Hour, Record: tt.rec}, &res)
				if tt.want != nil && !errors.Is(err, tt.want) {
					t.Errorf("%s: %+v, %v; want %v", tt.name, res, err, tt.want)
				}
				if tt.want == nil && (err != nil || !res.Granted || !res.Recorded || !res.ExpiresAt.Equal(t0.Add(time.Minute)) || res.Items[0].Remaining != 3000) {
					t.Errorf("%s: %+v, %v; want the grant it was (expiring at %v, 3000 left)", tt.name, res, err, t0.Add(time.Minute))
				}
			}
			for _, d := range []struct {
				dim  string
				want int64
			}{{"a#concurrent", 3000}, {"b#concurrent", 5000}, {"b#rpm", 100_000}} {
				if st := peekOne(t, s, d.dim); st.Tokens != d.want {
					t.Errorf("%s after the reuses: %d millitokens, want %d", d.dim, st.Tokens, d.want)
				}
			}
			r, err := other.Release(ctx, store.ReleaseRequest{Now: t0, ID: id})
			if err != nil || !r.Released {
				t.Fatalf("release = %+v, %v", r, err)
			}
			for _, dim := range []string{"a#concurrent", "b#concurrent"} {
				if st := peekOne(t, s, dim); st.Tokens != 5000 || st.ActiveLeases != 0 {
					t.Errorf("%s after release: %+v; want 5000 and no lease", dim, st)
				}
			}
			// Released, the id is free again.
			acquireAt(t, s, t0, time.Minute, false, store.Item{Dimension: "b#concurrent"})
		})
	}
}

// TestLeaseIDRace sends the same acquisition from several handles at once
// (a client retrying while its first attempt is still in flight): all get
// the same grant and exactly one slot is taken.
func TestLeaseIDRace(t *testing.T) {
	db := newClient()
	table := newTable(t, db)
	s := openStore(t, db, table)
	put(t, s, t0, store.Bucket{Name: "a#concurrent", Config: bucket.ConcurrentSlots(10)})
	id := store.NewLeaseID()
	var wg sync.WaitGroup
	for range 6 {
		h := openStore(t, newClient(), table)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var res store.AcquireResult
				err := h.Acquire(context.Background(), &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "a#concurrent"}}, ID: id, TTL: time.Minute}, &res)
				if errors.Is(err, store.ErrContention) {
					continue
				}
				if err != nil || !res.Granted || !res.ExpiresAt.Equal(t0.Add(time.Minute)) {
					t.Errorf("acquire = %+v, %v; want granted", res, err)
				}
				return
			}
		}()
	}
	wg.Wait()
	if st := peekOne(t, s, "a#concurrent"); st.Tokens != 9000 || st.ActiveLeases != 1 {
		t.Errorf("after: %+v; want one slot taken", st)
	}
}

// TestLeaseIDReuseSameInstant reuses a lease id at the same instant on
// buckets at the same version as the first grant's: the second request is
// a different one and must be refused as ErrLeaseInUse. Its transaction
// used to carry the first one's ClientRequestToken (derived from the id,
// the time and the versions only), and DynamoDB refused it with
// IdempotentParameterMismatch.
func TestLeaseIDReuseSameInstant(t *testing.T) {
	s := newStore(t)
	for _, b := range []store.Bucket{
		{Name: "a#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1000, time.Minute)},
		{Name: "b#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1000, time.Minute)},
		{Name: "c#concurrent", Config: bucket.ConcurrentSlots(2)},
		{Name: "d#rpm", Config: bucket.PerPeriod(bucket.Requests, 5, time.Second)},
	} {
		put(t, s, t0, b)
	}
	id := store.NewLeaseID()
	var res store.AcquireResult
	first := &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "a#tpm", Cost: 274}, {Dimension: "b#tpm", Cost: 365}}, ID: id, TTL: time.Minute}
	if err := s.Acquire(context.Background(), first, &res); err != nil || !res.Granted {
		t.Fatalf("first = %+v, %v", res, err)
	}
	second := &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "c#concurrent"}, {Dimension: "d#rpm", Cost: 3}}, ID: id, TTL: time.Minute}
	err := s.Acquire(context.Background(), second, &res)
	if err != nil || !res.Granted {
		// The first was unrecorded: the id has no record, so the second
		// is a new lease.
		t.Fatalf("second = %+v, %v; want granted (the first left no record)", res, err)
	}
	third := &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "a#tpm", Cost: 1}, {Dimension: "c#concurrent"}}, ID: id, TTL: time.Minute}
	if err := s.Acquire(context.Background(), third, &res); !errors.Is(err, store.ErrLeaseInUse) {
		t.Fatalf("third = %+v, %v; want ErrLeaseInUse", res, err)
	}
}
