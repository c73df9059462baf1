package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// testAdmin covers Peek, PutBucket, DeleteBucket, ListBuckets, Leases and
// Close.
func testAdmin(t *testing.T, h Harness) {
	t.Run("Peek", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, rpm("openai#rpm", 100))
		e.put(0, slots("openai#concurrent", 3))
		e.grant(e.req(0, item("openai#rpm", 100)))
		long := e.req(0, item("openai#concurrent", 1))
		long.TTL = 30 * time.Second
		e.grant(long)
		short := e.req(100, item("openai#concurrent", 2))
		short.TTL = 10 * time.Second
		e.grant(short)
		for range 3 { // peeking never consumes
			st, err := e.s.Peek(e.ctx, store.PeekRequest{Now: At(1500), Dimensions: []string{"openai#concurrent", "openai#rpm"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := names(st); !slices.Equal(got, []string{"openai#concurrent", "openai#rpm"}) {
				t.Fatalf("Peek order = %q, want the order asked", got)
			}
			c, r := st[0], st[1]
			if c.Tokens != 0 || c.ActiveLeases != 2 || !c.NextExpiry.Equal(At(10_100)) || c.Capacity != 3 || c.Type != bucket.Concurrent {
				t.Errorf("concurrent = %+v, want 0 tokens, 2 leases, next expiry +10100ms", c)
			}
			// A store that records every grant counts the rpm grant's record.
			wantLeases, wantNext := 0, time.Time{}
			if h.AlwaysRecords {
				wantLeases, wantNext = 1, At(60_000)
			}
			if r.Tokens != 2500 || r.LastRefill != At(1500).UnixMilli() || r.ActiveLeases != wantLeases || !r.NextExpiry.Equal(wantNext) || r.Bucket != rpm("openai#rpm", 100) {
				t.Errorf("rpm = %+v, want 2500 millitokens refilled over 1.5s, refill timestamp +1500, %d leases", r, wantLeases)
			}
			if !r.Now.Equal(At(1500)) {
				t.Errorf("Now = %s, want %s", r.Now, At(1500))
			}
		}
		res := e.acquire(e.req(1500, item("openai#rpm", 3)))
		if res.Granted || res.RetryIn != 300*time.Millisecond {
			t.Errorf("after peeks: granted %t, RetryIn %s; want denied, 300ms", res.Granted, res.RetryIn)
		}
		_, err := e.s.Peek(e.ctx, store.PeekRequest{Now: At(0), Dimensions: []string{"openai#rpm", "openai#nope"}})
		wantErr(t, "Peek unknown", err, store.ErrUnknownDimension, "openai#nope")
	})

	t.Run("PutBucket", func(t *testing.T) {
		tests := []struct {
			name   string
			take   int64 // of capacity 100 at +0
			next   store.Bucket
			reset  bool
			at     int64
			tokens int64
			last   int64
		}{
			{"same config again changes nothing", 0, rpm("x#rpm", 100), false, 0, 100_000, 0},
			{"reconfigure keeps the refilled balance", 70, rpm("x#rpm", 50), false, 600, 31_000, 600},
			{"reconfigure clamps to the new capacity", 10, rpm("x#rpm", 50), false, 0, 50_000, 0},
			{"reset fills", 70, rpm("x#rpm", 50), true, 600, 50_000, 600},
			{"raising capacity does not fill", 70, rpm("x#rpm", 1000), false, 0, 30_000, 0},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				e := newEnv(t, h)
				e.put(0, rpm("x#rpm", 100))
				if tt.take > 0 {
					e.grant(e.req(0, item("x#rpm", tt.take)))
				}
				if err := e.s.PutBucket(e.ctx, store.PutBucketRequest{Now: At(tt.at), Bucket: tt.next, Reset: tt.reset}); err != nil {
					t.Fatal(err)
				}
				st := e.peek(tt.at, "x#rpm")
				if st.Tokens != tt.tokens || st.LastRefill != At(tt.last).UnixMilli() || st.Bucket != tt.next {
					t.Errorf("after PutBucket: %+v; want config %+v, %d millitokens, refill at +%dms", st, tt.next, tt.tokens, tt.last)
				}
			})
		}
		t.Run("debt kept below a raised floor", func(t *testing.T) {
			e := newEnv(t, h)
			e.put(0, tpm("x#tpm", 1000))
			r := e.req(0, item("x#tpm", 1000))
			r.Record = true
			e.grant(r)
			if _, err := e.s.Adjust(e.ctx, store.AdjustRequest{Now: At(0), ID: r.ID, Recorded: true, Dimension: "x#tpm", Delta: 800}); err != nil {
				t.Fatal(err)
			}
			b := tpm("x#tpm", 1000)
			b.MaxDebt = 300
			e.put(0, b)
			// The debt is usage that happened: a lower maximum debt, or a
			// lower limit, stops later settlements at the new floor but
			// never forgives what is owed.
			e.wantTokens(0, "x#tpm", -800_000)
			e.put(0, tpm("x#tpm", 500))
			e.wantTokens(0, "x#tpm", -800_000)
		})
	})

	t.Run("DeleteBucket", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, slots("eleven#concurrent", 2))
		e.put(0, rpm("eleven#rpm", 10))
		lease := e.req(0, item("eleven#concurrent", 1))
		lease.TTL = time.Second
		e.grant(lease)
		if err := e.s.DeleteBucket(e.ctx, store.DeleteBucketRequest{Name: "eleven#concurrent"}); err != nil {
			t.Fatal(err)
		}
		var res store.AcquireResult
		err := e.s.Acquire(e.ctx, e.req(0, item("eleven#concurrent", 1)), &res)
		wantErr(t, "Acquire after delete", err, store.ErrUnknownDimension, "eleven#concurrent")
		_, err = e.s.Peek(e.ctx, store.PeekRequest{Now: At(0), Dimensions: []string{"eleven#concurrent"}})
		wantErr(t, "Peek after delete", err, store.ErrUnknownDimension, "eleven#concurrent")
		wantErr(t, "second delete", e.s.DeleteBucket(e.ctx, store.DeleteBucketRequest{Name: "eleven#concurrent"}), store.ErrUnknownDimension, "eleven#concurrent")
		bs, err := e.s.ListBuckets(e.ctx, store.ListBucketsRequest{Now: At(0)})
		if err != nil || !slices.Equal(names(bs), []string{"eleven#rpm"}) {
			t.Errorf("ListBuckets = %q, %v; want [eleven#rpm]", names(bs), err)
		}
		r, err := e.s.Reconcile(e.ctx, store.ReconcileRequest{Now: At(1000)})
		if want := (store.ReconcileResult{Restored: 1, Orphans: 1}); err != nil || !equalReconcile(r, want) {
			t.Errorf("Reconcile = %+v, %v; want %+v", r, err, want)
		}
		if ls, err := e.s.Leases(e.ctx, store.LeaseQuery{Now: At(1000)}); err != nil || len(ls) != 0 {
			t.Errorf("Leases after reconcile = %+v, %v; want none", ls, err)
		}
		e.put(2000, slots("eleven#concurrent", 2)) // recreated: new and full
		e.wantTokens(2000, "eleven#concurrent", 2000)
	})

	t.Run("ListBucketsSorted", func(t *testing.T) {
		e := newEnv(t, h)
		for _, n := range []string{"openai#tpm", "anthropic#rpm", "openai#gpt-4o#tpm", "eleven#concurrent", "openai#rpm"} {
			e.put(0, rpm(n, 60))
		}
		e.grant(e.req(0, item("openai#rpm", 60)))
		bs, err := e.s.ListBuckets(e.ctx, store.ListBucketsRequest{Now: At(2000)})
		want := []string{"anthropic#rpm", "eleven#concurrent", "openai#gpt-4o#tpm", "openai#rpm", "openai#tpm"}
		if err != nil || !slices.Equal(names(bs), want) {
			t.Fatalf("ListBuckets = %q, %v; want %q", names(bs), err, want)
		}
		if bs[3].Tokens != 2000 {
			t.Errorf("openai#rpm listed with %d millitokens, want 2000 (refilled)", bs[3].Tokens)
		}
	})

	t.Run("LeasesQuery", func(t *testing.T) {
		e := newEnv(t, h)
		a, b := e.twoDims("concurrent")
		e.put(0, slots(a, 10))
		e.put(0, slots(b, 10))
		mk := func(at int64, ttl time.Duration, items ...store.Item) store.LeaseID {
			r := e.req(at, items...)
			r.TTL, r.Caller = ttl, "svc-"+items[0].Dimension
			e.grant(r)
			return r.ID
		}
		l3 := mk(0, 3*time.Second, item(a, 1))
		l1 := mk(0, 1*time.Second, item(a, 2), item(b, 3))
		l2 := mk(500, 1500*time.Millisecond, item(b, 1))
		tests := []struct {
			name string
			q    store.LeaseQuery
			want []store.LeaseID
		}{
			{"all, by expiry", store.LeaseQuery{Now: At(0)}, []store.LeaseID{l1, l2, l3}},
			{"by dimension", store.LeaseQuery{Now: At(0), Dimension: a}, []store.LeaseID{l1, l3}},
			{"expired at +2000", store.LeaseQuery{Now: At(2000), ExpiredOnly: true}, []store.LeaseID{l1, l2}},
			{"expired at +1000 (expiry is inclusive)", store.LeaseQuery{Now: At(1000), ExpiredOnly: true}, []store.LeaseID{l1}},
			{"limit", store.LeaseQuery{Now: At(0), Limit: 2}, []store.LeaseID{l1, l2}},
			{"expired on b", store.LeaseQuery{Now: At(5000), ExpiredOnly: true, Dimension: b}, []store.LeaseID{l1, l2}},
		}
		for _, tt := range tests {
			ls, err := e.s.Leases(e.ctx, tt.q)
			var got []store.LeaseID
			for _, l := range ls {
				got = append(got, l.ID)
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("%s: Leases = %v, %v; want %v", tt.name, got, err, tt.want)
			}
		}
		ls, err := e.s.Leases(e.ctx, store.LeaseQuery{Now: At(0), Dimension: b})
		if err != nil || len(ls) != 2 {
			t.Fatalf("Leases(b) = %+v, %v", ls, err)
		}
		got := ls[0]
		if got.ID != l1 || got.Caller != "svc-"+a || !got.CreatedAt.Equal(At(0)) || !got.ExpiresAt.Equal(At(1000)) ||
			!slices.Equal(got.Items, []store.Item{item(a, 2), item(b, 3)}) {
			t.Errorf("lease = %+v, want id %s, caller svc-%s, created +0, expires +1000ms, items %s:2 %s:3", got, l1, a, a, b)
		}
	})

	t.Run("Close", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, rpm("x#rpm", 10))
		if err := e.s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		ctx, now, id := context.Background(), At(0), e.id()
		var res store.AcquireResult
		ops := map[string]error{
			"Acquire":      e.s.Acquire(ctx, e.req(0, item("x#rpm", 1)), &res),
			"PutBucket":    e.s.PutBucket(ctx, store.PutBucketRequest{Now: now, Bucket: rpm("y#rpm", 1)}),
			"DeleteBucket": e.s.DeleteBucket(ctx, store.DeleteBucketRequest{Name: "x#rpm"}),
		}
		_, ops["Release"] = e.s.Release(ctx, store.ReleaseRequest{Now: now, ID: id})
		_, ops["Adjust"] = e.s.Adjust(ctx, store.AdjustRequest{Now: now, ID: id, Recorded: true, Dimension: "x#rpm", Delta: 1})
		_, ops["Extend"] = e.s.Extend(ctx, store.ExtendRequest{Now: now, ID: id, TTL: time.Second})
		_, ops["Penalize"] = e.s.Penalize(ctx, store.PenalizeRequest{Now: now, Dimension: "x#rpm", FactorMilli: 800})
		if !e.caps.noCooldown {
			_, ops["Cooldown"] = e.s.Cooldown(ctx, store.CooldownRequest{Now: now, Dimension: "x#rpm", Until: now.Add(time.Second)})
		}
		if !e.caps.noSync {
			_, ops["Sync"] = e.s.Sync(ctx, store.SyncRequest{Now: now, Dimension: "x#rpm", Remaining: 1})
		}
		_, ops["Peek"] = e.s.Peek(ctx, store.PeekRequest{Now: now, Dimensions: []string{"x#rpm"}})
		_, ops["Reconcile"] = e.s.Reconcile(ctx, store.ReconcileRequest{Now: now})
		_, ops["ListBuckets"] = e.s.ListBuckets(ctx, store.ListBucketsRequest{Now: now})
		_, ops["Leases"] = e.s.Leases(ctx, store.LeaseQuery{Now: now})
		for op, err := range ops {
			if !errors.Is(err, store.ErrClosed) {
				t.Errorf("%s after Close: error %v, want ErrClosed", op, err)
			}
		}
	})
}

// equalReconcile compares reconcile results, treating nil and empty
// Dimensions alike.
func equalReconcile(got, want store.ReconcileResult) bool {
	return got.Restored == want.Restored && got.Reclaimed == want.Reclaimed && got.AlreadyCapped == want.AlreadyCapped &&
		got.Orphans == want.Orphans && got.More == want.More && slices.Equal(got.Dimensions, want.Dimensions)
}
