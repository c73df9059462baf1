package dynamostore

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// newTTLTable creates a fresh table with TTL enabled on ttl, as CreateTable
// does in production. DynamoDB Local's TTL sweeper deletes expired items
// within seconds, which these tests rely on.
func newTTLTable(tb testing.TB, db *dynamodb.Client) string {
	tb.Helper()
	name := server.TableName("sluice-ttl")
	if err := CreateTable(context.Background(), db, name); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_, _ = server.Client().DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return name
}

// acquireAt acquires items at now with ttl and id, failing the test unless
// granted.
func acquireAt(t testing.TB, s *Store, now time.Time, ttl time.Duration, record bool, items ...store.Item) store.LeaseID {
	t.Helper()
	id := store.NewLeaseID()
	var res store.AcquireResult
	req := &store.AcquireRequest{Now: now, Items: items, ID: id, Caller: "ttl-test", TTL: ttl, Record: record}
	if err := s.Acquire(context.Background(), req, &res); err != nil || !res.Granted {
		t.Fatalf("acquire %v: %+v %v", items, res, err)
	}
	return id
}

// waitSwept polls (bounded) until DynamoDB Local's TTL process has deleted
// every lease item of leases.
func waitSwept(t *testing.T, db *dynamodb.Client, table string, leases map[store.LeaseID][]string) {
	t.Helper()
	var pks []string
	for id, dims := range leases {
		for _, d := range dims {
			pks = append(pks, leasePK(d, id))
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		left := 0
		for _, pk := range pks {
			if rawGet(t, db, table, pk) != nil {
				left++
			}
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("DynamoDB Local's TTL process left %d of %d expired lease items after 3 minutes", left, len(pks))
		}
		time.Sleep(250 * time.Millisecond) // polling the sweeper, bounded above
	}
}

func peekOne(t testing.TB, s *Store, dim string) store.BucketState {
	t.Helper()
	st, err := s.Peek(context.Background(), store.PeekRequest{Now: time.Now(), Dimensions: []string{dim}})
	if err != nil {
		t.Fatal(err)
	}
	return st[0]
}

// TestTTLSweptLeases lets DynamoDB's TTL process delete the items of
// expired leases (the caller's clock an hour behind, so their ttl is long
// past) before the reconciler runs: every slot still comes back, once,
// from the holder entries, in small batches; records on requests buckets
// are cleaned from holders; a live lease keeps its slot (so that a double
// restore would show as a balance above capacity minus one, not be hidden
// by the capacity guard).
func TestTTLSweptLeases(t *testing.T) {
	for _, path := range []struct {
		name string
		opts []Option
	}{{"fast", nil}, {"readfirst", []Option{WithReadThenTransact()}}} {
		t.Run(path.name, func(t *testing.T) {
			ctx := context.Background()
			db := newClient()
			table := newTTLTable(t, db)
			s := openStore(t, db, table, path.opts...)
			past := time.Now().Add(-time.Hour)
			const conc, second, rpm = "ttl#concurrent", "ttl#second", "ttl#rpm"
			put(t, s, past, store.Bucket{Name: conc, Config: bucket.ConcurrentSlots(8)})
			put(t, s, past, store.Bucket{Name: second, Config: bucket.ConcurrentSlots(3)})
			put(t, s, past, store.Bucket{Name: rpm, Config: bucket.PerPeriod(bucket.Requests, 100, time.Minute)})

			abandoned := map[store.LeaseID][]string{}
			add := func(record bool, items ...store.Item) {
				id := acquireAt(t, s, past, time.Minute, record, items...)
				for _, it := range items {
					abandoned[id] = append(abandoned[id], it.Dimension)
				}
			}
			add(false, store.Item{Dimension: conc})
			add(false, store.Item{Dimension: conc})
			add(false, store.Item{Dimension: conc, Cost: 2})
			add(false, store.Item{Dimension: conc}, store.Item{Dimension: second, Cost: 2})
			add(false, store.Item{Dimension: conc}, store.Item{Dimension: rpm})
			add(true, store.Item{Dimension: rpm, Cost: 5})
			live := acquireAt(t, s, time.Now(), time.Hour, false, store.Item{Dimension: conc})

			waitSwept(t, db, table, abandoned)
			if rawGet(t, db, table, leasePK(conc, live)) == nil {
				t.Fatal("the live lease's item was swept")
			}
			if st := peekOne(t, s, conc); st.Tokens != 1000 || st.ActiveLeases != 6 {
				t.Fatalf("before reconcile: %d millitokens, %d holders; want 1000 and 6", st.Tokens, st.ActiveLeases)
			}

			var got store.ReconcileResult
			dims := map[string]bool{}
			for calls := 0; ; calls++ {
				if calls > 10 {
					t.Fatal("reconcile did not finish in 10 batches")
				}
				r, err := s.Reconcile(ctx, store.ReconcileRequest{Now: time.Now(), Limit: 2})
				if err != nil {
					t.Fatal(err)
				}
				got.Restored += r.Restored
				got.Reclaimed += r.Reclaimed
				got.AlreadyCapped += r.AlreadyCapped
				got.Orphans += r.Orphans
				for _, d := range r.Dimensions {
					dims[d] = true
				}
				if !r.More {
					break
				}
			}
			want := store.ReconcileResult{Restored: 6, Reclaimed: 5}
			if got.Restored != want.Restored || got.Reclaimed != want.Reclaimed || got.AlreadyCapped != 0 || got.Orphans != 0 {
				t.Errorf("reconcile totals = %+v; want %+v", got, want)
			}
			if ds := slices.Sorted(func(yield func(string) bool) {
				for d := range dims {
					if !yield(d) {
						return
					}
				}
			}); strings.Join(ds, ",") != conc+","+rpm+","+second {
				t.Errorf("dimensions = %v", ds)
			}
			if st := peekOne(t, s, conc); st.Tokens != 7000 || st.ActiveLeases != 1 {
				t.Errorf("%s after: %d millitokens, %d holders; want 7000 (one live slot) and 1", conc, st.Tokens, st.ActiveLeases)
			}
			if st := peekOne(t, s, second); st.Tokens != 3000 || st.ActiveLeases != 0 {
				t.Errorf("%s after: %d millitokens, %d holders; want 3000 and 0", second, st.Tokens, st.ActiveLeases)
			}
			if st := peekOne(t, s, rpm); st.ActiveLeases != 0 {
				t.Errorf("%s after: %d holders; want 0", rpm, st.ActiveLeases)
			}
			if r, err := s.Reconcile(ctx, store.ReconcileRequest{Now: time.Now(), Limit: store.DefaultReconcileLimit}); err != nil || r.Restored != 0 || r.More {
				t.Errorf("second reconcile = %+v, %v; want nothing", r, err)
			}
			for id := range abandoned {
				if r, err := s.Release(ctx, store.ReleaseRequest{Now: time.Now(), ID: id}); err != nil || r.Released {
					t.Errorf("release after reconcile = %+v, %v; want nothing released", r, err)
				}
			}
			if r, err := s.Release(ctx, store.ReleaseRequest{Now: time.Now(), ID: live}); err != nil || !r.Released {
				t.Errorf("release of the live lease = %+v, %v", r, err)
			}
			if st := peekOne(t, s, conc); st.Tokens != 8000 || st.ActiveLeases != 0 {
				t.Errorf("at the end: %d millitokens, %d holders; want 8000 and 0", st.Tokens, st.ActiveLeases)
			}
		})
	}
}

// TestTTLSweptRace races three reconcilers (small batches, separate stores,
// as separate Lambda invocations) and a releaser (the acquiring store,
// which still knows the leases' dimensions and releases through the holder
// entries) over slots whose lease items DynamoDB's TTL process has deleted.
// A sampler checks throughout that the balance plus the holders equals the
// capacity and never exceeds it; at the end every slot is back exactly once
// (a live lease keeps the balance below capacity, so the capacity guard
// cannot hide a double restore) and the releases and reconciled leases add
// up to the abandoned ones.
func TestTTLSweptRace(t *testing.T) {
	const capacity, n, rounds = 18, 16, 1
	const dim = "race#concurrent"
	ctx := context.Background()
	db := newClient()
	table := newTTLTable(t, db)
	s := openStore(t, db, table)
	past := time.Now().Add(-time.Hour)
	put(t, s, past, store.Bucket{Name: dim, Config: bucket.ConcurrentSlots(capacity)})
	live := acquireAt(t, s, time.Now(), time.Hour, false, store.Item{Dimension: dim})

	for round := range rounds {
		abandoned := map[store.LeaseID][]string{}
		var ids []store.LeaseID
		for range n {
			id := acquireAt(t, s, past, time.Minute, false, store.Item{Dimension: dim})
			abandoned[id] = []string{dim}
			ids = append(ids, id)
		}
		waitSwept(t, db, table, abandoned)

		stop := make(chan struct{})
		var samples atomic.Int64
		var sampler sync.WaitGroup
		sampler.Add(1)
		go func() {
			defer sampler.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				st, err := s.Peek(ctx, store.PeekRequest{Now: time.Now(), Dimensions: []string{dim}})
				if err != nil {
					t.Error(err)
					return
				}
				if tok := st[0].Tokens; tok < 0 || tok > (capacity-1)*1000 || tok/1000+int64(st[0].ActiveLeases) != capacity {
					t.Errorf("sample: %d millitokens and %d holders, capacity %d", tok, st[0].ActiveLeases, capacity)
				}
				samples.Add(1)
			}
		}()

		var wg sync.WaitGroup
		var restored, reclaimed, released atomic.Int64
		for range 3 {
			r := openStore(t, db, table)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					res, err := r.Reconcile(ctx, store.ReconcileRequest{Now: time.Now(), Limit: 2})
					if err != nil {
						t.Error(err)
						return
					}
					if res.AlreadyCapped != 0 {
						t.Errorf("reconcile capped a restore: %+v", res)
					}
					restored.Add(int64(res.Restored))
					reclaimed.Add(int64(res.Reclaimed))
					if res.Restored == 0 && !res.More {
						return
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rand.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
			for _, id := range ids {
				res, err := s.Release(ctx, store.ReleaseRequest{Now: time.Now(), ID: id})
				if err != nil {
					t.Error(err)
					return
				}
				if res.Released {
					released.Add(1)
					if len(res.Restored) != 1 || res.Restored[0].Capped || res.Restored[0].Cost != 1 {
						t.Errorf("release restored %+v; want one uncapped slot", res.Restored)
					}
				}
			}
		}()
		wg.Wait()
		close(stop)
		sampler.Wait()

		t.Logf("round %d: %d released, %d reconciled, %d samples", round, released.Load(), restored.Load(), samples.Load())
		if released.Load()+restored.Load() != n || reclaimed.Load() != restored.Load() {
			t.Errorf("round %d: released %d + reconciled %d (reclaimed %d); want %d in all", round, released.Load(), restored.Load(), reclaimed.Load(), n)
		}
		if st := peekOne(t, s, dim); st.Tokens != (capacity-1)*1000 || st.ActiveLeases != 1 {
			t.Fatalf("round %d: after: %d millitokens, %d holders; want %d and 1", round, st.Tokens, st.ActiveLeases, (capacity-1)*1000)
		}
		if samples.Load() == 0 {
			t.Errorf("round %d: the sampler took no samples", round)
		}
	}
	if rawGet(t, db, table, leasePK(dim, live)) == nil {
		t.Error("the live lease's item was swept")
	}
}

// TestLegacyHolderEntry: a holder entry written before the cost was kept
// (the expiry alone) on a concurrent bucket, whose lease item is gone,
// cannot be restored: Reconcile leaves it, counts nothing and does not
// report More (which would loop the reconciler).
func TestLegacyHolderEntry(t *testing.T) {
	ctx := context.Background()
	db := newClient()
	table := newTable(t, db)
	s := openStore(t, db, table)
	const dim = "legacy#concurrent"
	put(t, s, t0, store.Bucket{Name: dim, Config: bucket.ConcurrentSlots(2)})
	id := acquireAt(t, s, t0, time.Minute, false, store.Item{Dimension: dim})
	// Rewrite the entry in the old form and delete the lease item, as TTL would.
	if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key(dim),
		UpdateExpression:          aws.String("SET #h.#id = :e"),
		ExpressionAttributeNames:  map[string]string{"#h": attrHolders, "#id": id.String()},
		ExpressionAttributeValues: map[string]types.AttributeValue{":e": numInt(t0.Add(time.Minute).UnixMilli())},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key(leasePK(dim, id))}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Reconcile(ctx, store.ReconcileRequest{Now: t0.Add(time.Hour), Limit: store.DefaultReconcileLimit})
	if err != nil || r.Restored != 0 || r.More {
		t.Errorf("reconcile = %+v, %v; want nothing done", r, err)
	}
	if st, err := s.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{dim}}); err != nil || st[0].Tokens != 1000 || st[0].ActiveLeases != 1 {
		t.Errorf("after: %+v %v; want the entry left as it was", st, err)
	}
}

// TestPartlySwept: TTL deletes a multi-dimension lease's items one at a
// time. Release (or reconcile) of a lease with one item left restores the
// swept dimension too, from its holder entry, in the same transaction; and
// a lease id reused while a bucket still lists it is refused rather than
// overwriting the entry (which would lose the first grant's slot).
func TestPartlySwept(t *testing.T) {
	for _, path := range []struct {
		name string
		opts []Option
	}{{"fast", nil}, {"readfirst", []Option{WithReadThenTransact()}}} {
		t.Run(path.name, func(t *testing.T) {
			ctx := context.Background()
			db := newClient()
			table := newTable(t, db)
			s := openStore(t, db, table, path.opts...)
			const a, b = "part#a", "part#b"
			put(t, s, t0, store.Bucket{Name: a, Config: bucket.ConcurrentSlots(3)})
			put(t, s, t0, store.Bucket{Name: b, Config: bucket.ConcurrentSlots(3)})
			sweep := func(dim string, id store.LeaseID) {
				t.Helper()
				if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key(leasePK(dim, id))}); err != nil {
					t.Fatal(err)
				}
			}
			id := acquireAt(t, s, t0, time.Minute, false, store.Item{Dimension: a, Cost: 2}, store.Item{Dimension: b})
			sweep(a, id)

			var res store.AcquireResult
			req := &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: a}}, ID: id, TTL: time.Minute}
			if err := s.Acquire(ctx, req, &res); !errors.Is(err, store.ErrLeaseInUse) {
				t.Errorf("acquire with a listed lease id = %+v, %v; want ErrLeaseInUse", res, err)
			}

			r, err := s.Release(ctx, store.ReleaseRequest{Now: t0, ID: id})
			if err != nil || !r.Released || len(r.Restored) != 2 {
				t.Fatalf("release = %+v, %v; want both dimensions restored", r, err)
			}
			for _, st := range []store.BucketState{peekOne(t, s, a), peekOne(t, s, b)} {
				if st.Tokens != 3000 || st.ActiveLeases != 0 {
					t.Errorf("%s after release: %d millitokens, %d holders", st.Name, st.Tokens, st.ActiveLeases)
				}
			}

			// The same through the reconciler's lease-item phase.
			id = acquireAt(t, s, t0, time.Minute, false, store.Item{Dimension: a, Cost: 2}, store.Item{Dimension: b})
			sweep(b, id)
			rec, err := s.Reconcile(ctx, store.ReconcileRequest{Now: t0.Add(time.Hour), Limit: store.DefaultReconcileLimit})
			if err != nil || rec.Restored != 1 || rec.Reclaimed != 1 || strings.Join(rec.Dimensions, ",") != a+","+b {
				t.Errorf("reconcile = %+v, %v; want one lease over both dimensions", rec, err)
			}
			for _, st := range []store.BucketState{peekOne(t, s, a), peekOne(t, s, b)} {
				if st.Tokens != 3000 || st.ActiveLeases != 0 {
					t.Errorf("%s after reconcile: %d millitokens, %d holders", st.Name, st.Tokens, st.ActiveLeases)
				}
			}
		})
	}
}
