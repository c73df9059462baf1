package dynamostore

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// lossy is an http.RoundTripper that forwards every request to DynamoDB
// Local and, for the next n requests of operation op, throws the response
// away once the request has been applied: the client sees a 500 or a reset
// connection, and the SDK sends the request again.
type lossy struct {
	base http.RoundTripper
	mu   sync.Mutex
	op   string
	n    int
	hits map[string]int
	// reset returns a connection reset instead of a 500.
	reset bool
}

func (l *lossy) arm(op string, n int, reset bool) {
	l.mu.Lock()
	l.op, l.n, l.reset, l.hits = op, n, reset, map[string]int{}
	l.mu.Unlock()
}

func (l *lossy) sent(op string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hits[op]
}

func (l *lossy) RoundTrip(req *http.Request) (*http.Response, error) {
	op := strings.TrimPrefix(req.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	resp, err := l.base.RoundTrip(req)
	l.mu.Lock()
	if l.hits != nil {
		l.hits[op]++
	}
	drop := err == nil && op == l.op && l.n > 0
	if drop {
		l.n--
	}
	reset := l.reset
	l.mu.Unlock()
	if !drop {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if reset {
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	r := apiError(500, "InternalServerError", "internal", nil)
	r.Request = req
	return r, nil
}

// TestRetriedWritesApplyOnce applies writes whose response is lost (a 500,
// a reset connection), so that the SDK sends them again, and checks that
// the store applies each change exactly once: a delta read-modify-written a
// second time would over-admit (a doubled refund) or over-penalize.
func TestRetriedWritesApplyOnce(t *testing.T) {
	rpm := store.Bucket{Name: "v#rpm", Config: bucket.PerPeriod(bucket.Requests, 100, time.Hour)}
	for _, reset := range []bool{false, true} {
		name := "500"
		if reset {
			name = "reset"
		}
		t.Run(name, func(t *testing.T) {
			l := &lossy{base: http.DefaultTransport}
			db := newClient(func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: l} })
			s := openStore(t, db, newTable(t, db))
			ctx := context.Background()
			tokens := func(dim string) int64 {
				t.Helper()
				st, err := s.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{dim}})
				if err != nil {
					t.Fatal(err)
				}
				return st[0].Tokens
			}

			t.Run("AdjustRefund", func(t *testing.T) {
				put(t, s, t0, rpm)
				if r := acquireOnce(t, s, t0, false, store.Item{Dimension: "v#rpm", Cost: 10}); !r.Granted {
					t.Fatalf("acquire: %+v", r)
				}
				before := tokens("v#rpm") // 90 tokens
				l.arm("UpdateItem", 1, reset)
				res, err := s.Adjust(ctx, store.AdjustRequest{Now: t0, ID: store.NewLeaseID(), Dimension: "v#rpm", Delta: -4, Held: 10, ExpiresAt: t0.Add(time.Minute)})
				if err != nil {
					t.Fatal(err)
				}
				if l.sent("UpdateItem") < 2 {
					t.Fatalf("UpdateItem sent %d times: the fault did not make the SDK retry", l.sent("UpdateItem"))
				}
				if got := tokens("v#rpm"); got != before+4000 || res.Remaining != got || res.Applied != -4000 {
					t.Errorf("after a refund of 4 retried by the SDK: %d millitokens (result %+v), want %d", got, res, before+4000)
				}
			})

			t.Run("AdjustCharge", func(t *testing.T) {
				before := tokens("v#rpm")
				l.arm("UpdateItem", 1, reset)
				if _, err := s.Adjust(ctx, store.AdjustRequest{Now: t0, ID: store.NewLeaseID(), Dimension: "v#rpm", Delta: 7, Held: 1, ExpiresAt: t0.Add(time.Minute)}); err != nil {
					t.Fatal(err)
				}
				if got := tokens("v#rpm"); got != before-7000 {
					t.Errorf("after a charge of 7 retried by the SDK: %d millitokens, want %d", got, before-7000)
				}
			})

			t.Run("Penalize", func(t *testing.T) {
				before := tokens("v#rpm")
				l.arm("UpdateItem", 1, reset)
				res, err := s.Penalize(ctx, store.PenalizeRequest{Now: t0, Dimension: "v#rpm", FactorMilli: 500})
				if err != nil {
					t.Fatal(err)
				}
				if got := tokens("v#rpm"); got != before/2 || res.Before != before || res.After != got {
					t.Errorf("after a ×0.5 penalty retried by the SDK: %d millitokens (result %+v), want %d", got, res, before/2)
				}
			})

			t.Run("Cooldown", func(t *testing.T) {
				before := tokens("v#rpm")
				l.arm("UpdateItem", 1, reset)
				res, err := s.Cooldown(ctx, store.CooldownRequest{Now: t0, Dimension: "v#rpm", Until: t0.Add(time.Second)})
				if err != nil {
					t.Fatal(err)
				}
				if l.sent("UpdateItem") < 2 {
					t.Fatalf("UpdateItem sent %d times: the fault did not make the SDK retry", l.sent("UpdateItem"))
				}
				want := store.CooldownResult{Before: before, After: 0, Until: t0.UnixMilli() + 1000}
				if got := tokens("v#rpm"); got != 0 || res != want {
					t.Errorf("after a cooldown retried by the SDK: %d millitokens, result %+v; want 0, %+v", got, res, want)
				}
			})

			t.Run("Sync", func(t *testing.T) {
				now := t0.Add(2 * time.Second) // after the cooldown: earning again
				before := tokens("v#rpm")
				st, err := s.Peek(ctx, store.PeekRequest{Now: now, Dimensions: []string{"v#rpm"}})
				if err != nil {
					t.Fatal(err)
				}
				s.forget("v#rpm") // the faulted UpdateItem is then the one that applies
				l.arm("UpdateItem", 1, reset)
				res, err := s.Sync(ctx, store.SyncRequest{Now: now, Dimension: "v#rpm", Remaining: 0})
				if err != nil {
					t.Fatal(err)
				}
				if l.sent("UpdateItem") < 2 {
					t.Fatalf("UpdateItem sent %d times: the fault did not make the SDK retry", l.sent("UpdateItem"))
				}
				want := store.SyncResult{Before: st[0].Tokens, After: 0}
				if before != 0 || want.Before <= 0 || res != want {
					t.Errorf("a sync retried by the SDK: %+v, want %+v (balance %d at t0, %d after the cooldown)", res, want, before, st[0].Tokens)
				}
			})

			t.Run("ReconfigureConcurrent", func(t *testing.T) {
				c := func(n int64) store.Bucket {
					return store.Bucket{Name: "v#concurrent", Config: bucket.ConcurrentSlots(n)}
				}
				put(t, s, t0, c(5))
				for range 2 {
					if r := acquireOnce(t, s, t0, true, store.Item{Dimension: "v#concurrent"}); !r.Granted {
						t.Fatalf("acquire: %+v", r)
					}
				}
				l.arm("UpdateItem", 1, reset)
				if err := s.PutBucket(ctx, store.PutBucketRequest{Now: t0, Bucket: c(10)}); err != nil {
					t.Fatal(err)
				}
				if got := tokens("v#concurrent"); got != 8000 {
					t.Errorf("5 → 10 slots with 2 held, retried by the SDK: %d millitokens, want 8000", got)
				}
			})

			t.Run("Extend", func(t *testing.T) {
				id := store.NewLeaseID()
				var r store.AcquireResult
				req := &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "v#concurrent"}}, ID: id, TTL: time.Minute, Record: true}
				if err := s.Acquire(ctx, req, &r); err != nil || !r.Granted {
					t.Fatalf("acquire: %+v, %v", r, err)
				}
				l.arm("TransactWriteItems", 1, reset)
				exp, err := s.Extend(ctx, store.ExtendRequest{Now: t0.Add(time.Second), ID: id, TTL: 5 * time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				if want := t0.Add(time.Second + 5*time.Minute); !exp.Equal(want) {
					t.Errorf("Extend = %v, want %v", exp, want)
				}
				st, err := s.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{"v#concurrent"}})
				if err != nil {
					t.Fatal(err)
				}
				if st[0].ActiveLeases != 3 || st[0].Tokens != 7000 {
					t.Errorf("after Extend: %d leases, %d millitokens; want 3, 7000", st[0].ActiveLeases, st[0].Tokens)
				}
			})
		})
	}
}

// TestWriteStateLostRace checks that writeState still reports a lost race
// (false, no error) when another write got in: the token it finds is not
// its own.
func TestWriteStateLostRace(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	put(t, s, t0, store.Bucket{Name: "v#rpm", Config: bucket.PerPeriod(bucket.Requests, 100, time.Hour)})
	bis, err := s.readBuckets(ctx, []string{"v#rpm"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Penalize(ctx, store.PenalizeRequest{Now: t0, Dimension: "v#rpm", FactorMilli: 900}); err != nil {
		t.Fatal(err)
	}
	ok, err := s.writeState(ctx, bis[0], bucket.State{Tokens: 1000, Last: t0.UnixMilli()}, "test")
	if ok || err != nil {
		t.Errorf("writeState on a stale version = %t, %v; want false, nil", ok, err)
	}
	if err := s.DeleteBucket(ctx, store.DeleteBucketRequest{Name: "v#rpm"}); err != nil {
		t.Fatal(err)
	}
	ok, err = s.writeState(ctx, bis[0], bucket.State{Tokens: 1000, Last: t0.UnixMilli()}, "test")
	if ok || err != nil {
		t.Errorf("writeState on a deleted row = %t, %v; want false", ok, err)
	}
}
