package pgstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/store"
)

// TestMaxSkewOption checks that WithMaxSkew reaches the SQL functions and
// the Go-side refill of Peek, in caller-clock mode. A bucket emptied at
// t0+1s is asked for a token by a caller whose clock reads t0+500ms:
// within the maximum skew it decides at t0+1s; beyond it, it is refused
// and told how far behind it is. Either way the refill timestamp stays at
// t0+1s, so the bucket earns its next token at t0+2s, not earlier.
func TestMaxSkewOption(t *testing.T) {
	tests := []struct {
		name       string
		skew       time.Duration
		wantBehind time.Duration // the acquisition at t0+500ms is refused for its clock
	}{
		{"default 1s: decide at the refill timestamp", store.DefaultMaxSkew, 0},
		{"100ms: refused, the refill timestamp kept", 100 * time.Millisecond, 500 * time.Millisecond},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t, WithMaxSkew(tt.skew))
			put(t, s, store.Bucket{Name: "r", Config: bucket.PerPeriod(bucket.Requests, 10, 10*time.Second)})
			acq := func(at time.Duration, cost int64) store.AcquireResult {
				t.Helper()
				var res store.AcquireResult
				req := &store.AcquireRequest{Now: t0.Add(at), Items: []store.Item{{Dimension: "r", Cost: cost}}, ID: store.NewLeaseID(), TTL: time.Minute}
				if err := s.Acquire(ctx, req, &res); err != nil {
					t.Fatal(err)
				}
				return res
			}
			if res := acq(time.Second, 10); !res.Granted {
				t.Fatalf("emptying acquire denied: %+v", res)
			}
			if res := acq(500*time.Millisecond, 1); res.Granted || res.RetryIn != time.Second || res.Behind != tt.wantBehind {
				t.Errorf("acquire at t0+500ms = granted %v, RetryIn %v, Behind %v; want denied, 1s, %v", res.Granted, res.RetryIn, res.Behind, tt.wantBehind)
			}
			st, err := s.Peek(ctx, store.PeekRequest{Now: t0.Add(500 * time.Millisecond), Dimensions: []string{"r"}})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := st[0].LastRefill, t0.Add(time.Second).UnixMilli(); got != want {
				t.Errorf("Peek at t0+500ms: LastRefill = t0%+dms, want t0%+dms", got-t0.UnixMilli(), want-t0.UnixMilli())
			}
			if got := acq(1500*time.Millisecond, 1).Granted; got {
				t.Errorf("acquire at t0+1.5s granted, want denied: the refill timestamp never moved back")
			}
			if got := acq(2*time.Second, 1).Granted; !got {
				t.Errorf("acquire at t0+2s denied, want granted")
			}
		})
	}
}

// TestMaxSkewValidated checks that New refuses a maximum skew outside
// 1ms..1h with an error naming the field (store.ErrInvalid, never
// ErrUnavailable).
func TestMaxSkewValidated(t *testing.T) {
	pool := pgtest.Pool(t, nil)
	for _, d := range []time.Duration{0, -time.Second, time.Microsecond, time.Hour + time.Millisecond} {
		_, err := New(pool, WithMaxSkew(d))
		var fe *bucket.FieldError
		if !errors.Is(err, store.ErrInvalid) || !errors.As(err, &fe) || fe.Field != "max_skew" {
			t.Errorf("New(WithMaxSkew(%v)) = %v, want a max_skew field error", d, err)
		}
	}
	for _, d := range []time.Duration{time.Millisecond, time.Hour} {
		if _, err := New(pool, WithMaxSkew(d)); err != nil {
			t.Errorf("New(WithMaxSkew(%v)) = %v", d, err)
		}
	}
	for _, d := range []time.Duration{0, -time.Second} {
		_, err := New(pool, WithTimeout(d))
		var fe *bucket.FieldError
		if !errors.Is(err, store.ErrInvalid) || !errors.As(err, &fe) || fe.Field != "pgstore.WithTimeout" {
			t.Errorf("New(WithTimeout(%v)) = %v, want a pgstore.WithTimeout field error", d, err)
		}
	}
}
