package sluice_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// lose deletes buckets, as a store restarted without persistence loses
// them.
func lose(t *testing.T, st store.Store, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := st.DeleteBucket(context.Background(), store.DeleteBucketRequest{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeclaredBucketsAreRecreated: a client with declared buckets puts a
// lost one back, once, and retries; an undeclared dimension stays a
// configuration error.
func TestDeclaredBucketsAreRecreated(t *testing.T) {
	rpm := sluice.Bucket{Name: "o#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)}
	tpm := sluice.Bucket{Name: "o#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1000, time.Minute)}
	conc := sluice.Bucket{Name: "o#concurrent", Config: bucket.ConcurrentSlots(2)}
	tests := []struct {
		name      string
		lost      []string
		call      func(ctx context.Context, c *sluice.Client) error
		wantErr   error
		recreated []string
	}{
		{"acquire", []string{"o#rpm"}, func(ctx context.Context, c *sluice.Client) error {
			_, err := c.Acquire(ctx, "o#rpm")
			return err
		}, nil, []string{"o#rpm"}},
		{"acquire many, every bucket lost", []string{"o#rpm", "o#tpm", "o#concurrent"}, func(ctx context.Context, c *sluice.Client) error {
			r, err := c.AcquireMany(ctx, []sluice.Request{{Dimension: "o#rpm", Cost: 1}, {Dimension: "o#tpm", Cost: 100}, {Dimension: "o#concurrent", Cost: 1}})
			if err == nil && r.Outcome != sluice.RetryIn {
				return errors.New("granted, want a denial: the rate buckets came back empty")
			}
			return err
		}, nil, []string{"o#rpm", "o#tpm", "o#concurrent"}},
		{"wait (a reservation)", []string{"o#tpm"}, func(ctx context.Context, c *sluice.Client) error {
			l, err := c.Wait(within(ctx, t, time.Second), []sluice.Request{{Dimension: "o#tpm", Cost: 10}})
			if err == nil {
				err = l.Release(ctx)
			}
			return err
		}, nil, []string{"o#tpm"}},
		{"peek", []string{"o#rpm"}, func(ctx context.Context, c *sluice.Client) error {
			_, err := c.Peek(ctx, "o#rpm")
			return err
		}, nil, []string{"o#rpm"}},
		{"penalize", []string{"o#rpm"}, func(ctx context.Context, c *sluice.Client) error {
			_, err := c.Penalize(ctx, "o#rpm", 0.5)
			return err
		}, nil, []string{"o#rpm"}},
		{"an undeclared dimension is a configuration error", nil, func(ctx context.Context, c *sluice.Client) error {
			_, err := c.Acquire(ctx, "o#rpd")
			return err
		}, sluice.ErrUnknownDimension, nil},
		{"a present bucket is not touched", nil, func(ctx context.Context, c *sluice.Client) error {
			_, err := c.Acquire(ctx, "o#rpm")
			return err
		}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			st := memstore.New()
			var logs bytes.Buffer
			var got []string
			obs := &sluice.Observer{Recreated: func(_ context.Context, e sluice.RecreateEvent) { got = append(got, e.Dimension) }}
			c, err := sluice.New(st, sluice.WithClock(sluice.ClockFunc(func() time.Time { return t0 })),
				sluice.WithBuckets([]sluice.Bucket{rpm, tpm, conc}), sluice.WithObserver(obs),
				sluice.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range []sluice.Bucket{rpm, tpm, conc} {
				if err := c.PutBucket(ctx, b); err != nil {
					t.Fatal(err)
				}
			}
			lose(t, st, tt.lost...)
			err = tt.call(ctx, c)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("call = %v, want %v", err, tt.wantErr)
			}
			if strings.Join(got, ",") != strings.Join(tt.recreated, ",") {
				t.Errorf("recreated %q, want %q", got, tt.recreated)
			}
			if n := strings.Count(logs.String(), "msg=bucket.recreated"); n != len(tt.recreated) {
				t.Errorf("%d bucket.recreated events logged, want %d:\n%s", n, len(tt.recreated), logs.String())
			}
		})
	}
}

// TestRecreateCountedOnceAcrossReplicas: replicas sharing a store that
// lost a bucket all call at once; exactly one creation wins, and none
// refills what another re-created and spent. The bucket is a concurrent
// one, which comes back full: its slots, held and never released, are
// granted exactly once each.
func TestRecreateCountedOnceAcrossReplicas(t *testing.T) {
	rpm := sluice.Bucket{Name: "o#concurrent", Config: bucket.ConcurrentSlots(9)}
	for round := range 20 {
		ctx := context.Background()
		st := memstore.New()
		var recreated, granted atomic.Int64
		obs := &sluice.Observer{Recreated: func(context.Context, sluice.RecreateEvent) { recreated.Add(1) }}
		var clients []*sluice.Client
		for range 4 {
			c, err := sluice.New(st, sluice.WithClock(sluice.ClockFunc(func() time.Time { return t0 })),
				sluice.WithBuckets([]sluice.Bucket{rpm}), sluice.WithObserver(obs))
			if err != nil {
				t.Fatal(err)
			}
			clients = append(clients, c)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := range 32 {
			wg.Go(func() {
				<-start
				for range 2 {
					r, err := clients[g%4].Acquire(ctx, "o#concurrent")
					if err != nil {
						t.Error(err)
						return
					}
					if r.Outcome == sluice.Granted {
						granted.Add(1)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		if n := recreated.Load(); n != 1 {
			t.Errorf("round %d: %d re-creations counted, want exactly 1", round, n)
		}
		if n := granted.Load(); n != 9 {
			t.Errorf("round %d: %d grants of slots never released, want the capacity 9", round, n)
		}
	}
}

func TestWithBucketsInvalid(t *testing.T) {
	good := sluice.Bucket{Name: "o#rpm", Config: bucket.PerPeriod(bucket.Requests, 9, time.Minute)}
	tests := []struct {
		name string
		bs   []sluice.Bucket
		want string
	}{
		{"duplicate", []sluice.Bucket{good, good}, "buckets"},
		{"invalid config", []sluice.Bucket{{Name: "o#tpm", Config: bucket.Config{Type: bucket.Tokens}}}, "capacity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sluice.New(memstore.New(), sluice.WithBuckets(tt.bs))
			if !errors.Is(err, sluice.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New = %v, want an invalid %s", err, tt.want)
			}
		})
	}
}

// TestPutBucketIfUnchanged: a conditional PutBucket writes only over what
// was read; a conflict is an answer (ErrConflict), not a store failure.
func TestPutBucketIfUnchanged(t *testing.T) {
	b10 := sluice.Bucket{Name: "o#rpm", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)}
	b20 := sluice.Bucket{Name: "o#rpm", Config: bucket.PerPeriod(bucket.Requests, 20, time.Minute)}
	tests := []struct {
		name    string
		exists  bool // o#rpm exists with b10
		read    *bucket.Config
		wantErr error
		want    int64 // capacity afterwards
	}{
		{"create when missing", false, nil, nil, 20},
		{"create refused when present", true, nil, sluice.ErrConflict, 10},
		{"change over the configuration read", true, &b10.Config, nil, 20},
		{"change refused over a stale read", true, &b20.Config, sluice.ErrConflict, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			var storeErrors int
			c, err := sluice.New(memstore.New(), sluice.WithObserver(&sluice.Observer{
				StoreError: func(context.Context, sluice.StoreErrorEvent) { storeErrors++ }}))
			if err != nil {
				t.Fatal(err)
			}
			if tt.exists {
				if err := c.PutBucket(ctx, b10); err != nil {
					t.Fatal(err)
				}
			}
			err = c.PutBucket(ctx, b20, sluice.IfUnchanged(tt.read))
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("PutBucket = %v, want %v", err, tt.wantErr)
			}
			var ce *sluice.ConflictError
			if tt.wantErr != nil && (!errors.As(err, &ce) || ce.Dimension != "o#rpm" || !ce.Found) {
				t.Errorf("conflict = %#v, want one naming o#rpm, found", ce)
			}
			if storeErrors != 0 {
				t.Errorf("%d store errors reported, want none", storeErrors)
			}
			if s, err := c.GetBucket(ctx, "o#rpm"); err != nil || s.Capacity != tt.want {
				t.Errorf("capacity = %d, %v; want %d", s.Capacity, err, tt.want)
			}
		})
	}
}
