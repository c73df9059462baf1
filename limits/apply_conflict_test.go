package limits_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/limits"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// interloper is a store where another writer acts just before each of the
// first n conditional writes of Apply.
type interloper struct {
	contract.Forward
	n     int
	other func(ctx context.Context, st store.Store, now time.Time)
}

func (s *interloper) PutBucket(ctx context.Context, req store.PutBucketRequest) error {
	if s.n > 0 && (req.IfAbsent || req.IfMatch != nil) {
		s.n--
		s.other(ctx, s.Store, req.Now)
	}
	return s.Store.PutBucket(ctx, req)
}

// TestApplyReplansOnConflict: a bucket changed between Apply's read and
// its write is read again, never overwritten unseen nor refilled.
func TestApplyReplansOnConflict(t *testing.T) {
	const file = `dimensions:
  x#rpm:
    type: requests
    capacity: 10
    per: 1m
`
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rpm := func(n int64) store.Bucket {
		return store.Bucket{Name: "x#rpm", Config: bucket.PerPeriod(bucket.Requests, n, time.Minute)}
	}
	spend := func(ctx context.Context, st store.Store, now time.Time) {
		var res store.AcquireResult
		req := &store.AcquireRequest{Now: now, Items: []store.Item{{Dimension: "x#rpm", Cost: 4}}, ID: store.NewLeaseID(), TTL: time.Minute}
		if err := st.Acquire(ctx, req, &res); err != nil || !res.Granted {
			t.Fatalf("spend: %v, %v", res.Granted, err)
		}
	}
	tests := []struct {
		name    string
		initial int64 // capacity of x#rpm before Apply; 0: none
		times   int   // the other writer acts before this many writes
		other   func(ctx context.Context, st store.Store, now time.Time)
		wantErr error
		want    []limits.Action
		tokens  int64
		config  int64
	}{
		{"another replica created it and spent", 0, 1, func(ctx context.Context, st store.Store, now time.Time) {
			if err := st.PutBucket(ctx, store.PutBucketRequest{Now: now, Bucket: rpm(10)}); err != nil {
				t.Fatal(err)
			}
			spend(ctx, st, now)
		}, nil, nil, 6000, 10},
		{"another writer reconfigured it", 20, 1, func(ctx context.Context, st store.Store, now time.Time) {
			if err := st.PutBucket(ctx, store.PutBucketRequest{Now: now, Bucket: rpm(30)}); err != nil {
				t.Fatal(err)
			}
			spend(ctx, st, now)
		}, nil, []limits.Action{limits.Update}, 10_000, 10},
		{"another writer keeps reconfiguring it", 20, 100, func(ctx context.Context, st store.Store, now time.Time) {
			bs, _ := st.ListBuckets(ctx, store.ListBucketsRequest{Now: now})
			if err := st.PutBucket(ctx, store.PutBucketRequest{Now: now, Bucket: rpm(bs[0].Capacity + 1)}); err != nil {
				t.Fatal(err)
			}
		}, sluice.ErrConflict, nil, 20_000, 26},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			mem := memstore.New()
			if tt.initial > 0 {
				if err := mem.PutBucket(ctx, store.PutBucketRequest{Now: at, Bucket: rpm(tt.initial)}); err != nil {
					t.Fatal(err)
				}
			}
			st := &interloper{Forward: contract.Forward{Store: mem}, n: tt.times, other: tt.other}
			c, err := sluice.New(st, sluice.WithClock(fixedClock{at}))
			if err != nil {
				t.Fatal(err)
			}
			done, err := limits.Apply(ctx, c, parse(t, file))
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Apply = %v, want %v", err, tt.wantErr)
			}
			var got []limits.Action
			for _, ch := range done {
				got = append(got, ch.Action)
			}
			if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
				t.Errorf("changes = %v, want %v", got, tt.want)
			}
			bs, err := mem.ListBuckets(ctx, store.ListBucketsRequest{Now: at})
			if err != nil || len(bs) != 1 {
				t.Fatalf("ListBuckets = %+v, %v", bs, err)
			}
			if bs[0].Tokens != tt.tokens || bs[0].Capacity != tt.config {
				t.Errorf("x#rpm = %d millitokens, capacity %d; want %d, %d", bs[0].Tokens, bs[0].Capacity, tt.tokens, tt.config)
			}
		})
	}
}
