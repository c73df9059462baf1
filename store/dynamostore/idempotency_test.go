package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/faultproxy"
	"github.com/ontopix/sluice/store"
)

// lossy is an http.RoundTripper that forwards every request to DynamoDB
// Local and, for the next n requests of operation op ("*": any write),
// throws the response away once the request has been applied: the client
// sees a 500 or a reset connection, and the SDK sends the request again.
type lossy struct {
	base http.RoundTripper
	mu   sync.Mutex
	op   string
	n    int
	hits map[string]int
	// reset returns a connection reset instead of a 500.
	reset bool
	// between, when set, runs after a request was applied and before its
	// response is thrown away: another writer getting in before the SDK
	// sends the request again.
	between func()
}

func (l *lossy) arm(op string, n int, reset bool) {
	l.mu.Lock()
	l.op, l.n, l.reset, l.hits = op, n, reset, map[string]int{}
	l.mu.Unlock()
}

// sentWrites counts the writes sent since arm.
func (l *lossy) sentWrites() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for op := range writeOps {
		n += l.hits[op]
	}
	return n
}

func (l *lossy) sent(op string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hits[op]
}

// writeOps are the operations that change the table.
var writeOps = map[string]bool{"UpdateItem": true, "PutItem": true, "DeleteItem": true, "TransactWriteItems": true}

func (l *lossy) RoundTrip(req *http.Request) (*http.Response, error) {
	op := strings.TrimPrefix(req.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	resp, err := l.base.RoundTrip(req)
	l.mu.Lock()
	if l.hits != nil {
		l.hits[op]++
	}
	drop := err == nil && (op == l.op || l.op == "*" && writeOps[op]) && l.n > 0
	if drop {
		l.n--
	}
	reset, between := l.reset, l.between
	l.mu.Unlock()
	if !drop {
		return resp, err
	}
	if between != nil {
		between()
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
				l.arm("*", 1, reset)
				res, err := s.Adjust(ctx, store.AdjustRequest{Now: t0, ID: store.NewLeaseID(), Dimension: "v#rpm", Delta: -4, Held: 10, ExpiresAt: t0.Add(time.Minute)})
				if err != nil {
					t.Fatal(err)
				}
				if n := l.sentWrites(); n < 2 {
					t.Fatalf("%d writes sent: the fault did not make the SDK retry", n)
				}
				if got := tokens("v#rpm"); got != before+4000 || res.Remaining != got || res.Applied != -4000 {
					t.Errorf("after a refund of 4 retried by the SDK: %d millitokens (result %+v), want %d", got, res, before+4000)
				}
			})

			t.Run("AdjustCharge", func(t *testing.T) {
				before := tokens("v#rpm")
				l.arm("*", 1, reset)
				if _, err := s.Adjust(ctx, store.AdjustRequest{Now: t0, ID: store.NewLeaseID(), Dimension: "v#rpm", Delta: 7, Held: 1, ExpiresAt: t0.Add(time.Minute)}); err != nil {
					t.Fatal(err)
				}
				if got := tokens("v#rpm"); got != before-7000 {
					t.Errorf("after a charge of 7 retried by the SDK: %d millitokens, want %d", got, before-7000)
				}
			})

			t.Run("Penalize", func(t *testing.T) {
				before := tokens("v#rpm")
				l.arm("*", 1, reset)
				res, err := s.Penalize(ctx, store.PenalizeRequest{Now: t0, Dimension: "v#rpm", FactorMilli: 500})
				if err != nil {
					t.Fatal(err)
				}
				if n := l.sentWrites(); n < 2 {
					t.Fatalf("%d writes sent: the fault did not make the SDK retry", n)
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

// TestRetriedReservationsApplyOnce is TestRetriedWritesApplyOnce for the
// writes of acquisitions and reservations without a lease record and of
// cancellations and releases: the first write each makes loses its
// response after DynamoDB Local applied it.
func TestRetriedReservationsApplyOnce(t *testing.T) {
	tpm := store.Bucket{Name: "v#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1000, time.Hour)}
	slots := store.Bucket{Name: "v#concurrent", Config: bucket.ConcurrentSlots(2)}
	ctx := context.Background()
	reserve := func(t *testing.T, s *Store, cost int64, record bool) (store.LeaseID, store.ReserveResult) {
		t.Helper()
		id := store.NewLeaseID()
		var r store.ReserveResult
		err := s.Reserve(ctx, &store.ReserveRequest{Now: t0, Items: []store.Item{{Dimension: "v#tpm", Cost: cost}}, ID: id, TTL: time.Hour, MaxWait: time.Hour, Record: record}, &r)
		if err != nil || !r.Granted {
			t.Fatalf("reserve %d: %+v, %v", cost, r, err)
		}
		return id, r
	}
	cases := []struct {
		name string
		run  func(t *testing.T, s *Store, arm func())
		dim  string
		want int64
	}{
		{"unrecorded acquire of 300", func(t *testing.T, s *Store, arm func()) {
			arm()
			if r := acquireOnce(t, s, t0, false, store.Item{Dimension: "v#tpm", Cost: 300}); !r.Granted || r.Items[0].Remaining != 700_000 {
				t.Errorf("acquire: %+v, want granted with 700000 left", r)
			}
		}, "v#tpm", 700_000},
		{"unrecorded reserve of 300", func(t *testing.T, s *Store, arm func()) {
			arm()
			if _, r := reserve(t, s, 300, false); r.Items[0].Remaining != 700_000 {
				t.Errorf("reserve: %+v, want 700000 left", r)
			}
		}, "v#tpm", 700_000},
		{"unrecorded cancel of 400", func(t *testing.T, s *Store, arm func()) {
			acquireOnce(t, s, t0, false, store.Item{Dimension: "v#tpm", Cost: 1000})
			id, r := reserve(t, s, 400, false)
			arm()
			res, err := s.Cancel(ctx, store.CancelRequest{Now: t0, ID: id, Items: []store.Item{{Dimension: "v#tpm", Cost: 400}}, ValidAt: r.ValidAt})
			if err != nil || !res.Cancelled || len(res.Returned) != 1 || res.Returned[0].Amount != 400_000 {
				t.Errorf("Cancel = %+v, %v; want 400000 back", res, err)
			}
		}, "v#tpm", 0},
		{"recorded cancel of 400", func(t *testing.T, s *Store, arm func()) {
			acquireOnce(t, s, t0, false, store.Item{Dimension: "v#tpm", Cost: 1000})
			id, _ := reserve(t, s, 400, true)
			arm()
			res, err := s.Cancel(ctx, store.CancelRequest{Now: t0, ID: id, Recorded: true, Hint: "v#tpm"})
			if err != nil || !res.Cancelled || len(res.Returned) != 1 || res.Returned[0].Amount != 400_000 {
				t.Errorf("Cancel = %+v, %v; want cancelled, 400000 back", res, err)
			}
		}, "v#tpm", 0},
		{"release of a slot", func(t *testing.T, s *Store, arm func()) {
			id := store.NewLeaseID()
			var r store.AcquireResult
			if err := s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: "v#concurrent"}}, ID: id, TTL: time.Minute}, &r); err != nil || !r.Granted {
				t.Fatalf("acquire: %+v, %v", r, err)
			}
			arm()
			res, err := s.Release(ctx, store.ReleaseRequest{Now: t0, ID: id, Hint: "v#concurrent"})
			if err != nil || !res.Released || len(res.Restored) != 1 {
				t.Errorf("Release = %+v, %v; want released, one slot back", res, err)
			}
		}, "v#concurrent", 2000},
	}
	for _, reset := range []bool{false, true} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/reset=%t", tc.name, reset), func(t *testing.T) {
				l := &lossy{base: http.DefaultTransport}
				db := newClient(func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: l} })
				s := openStore(t, db, newTable(t, db))
				put(t, s, t0, tpm)
				put(t, s, t0, slots)
				tc.run(t, s, func() { l.arm("*", 1, reset) })
				if sent := l.sentWrites(); sent < 2 {
					t.Fatalf("%d writes sent: the fault did not make the SDK retry", sent)
				}
				st, err := s.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{tc.dim}})
				if err != nil {
					t.Fatal(err)
				}
				if st[0].Tokens != tc.want {
					t.Errorf("after a %s retried by the SDK: %d millitokens, want %d", tc.name, st[0].Tokens, tc.want)
				}
			})
		}
	}
}

// TestRetriedWritesAfterAnotherWriter is TestRetriedWritesApplyOnce with
// another writer getting in between the lost response and the SDK's resend:
// the resend's condition then fails on a row that no longer carries its
// token, and the store must still recognise its own write as applied
// rather than decide again and apply the change a second time.
func TestRetriedWritesAfterAnotherWriter(t *testing.T) {
	tpm := store.Bucket{Name: "v#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1000, time.Hour)}
	ctx := context.Background()
	take := func(t *testing.T, s *Store, cost int64) {
		t.Helper()
		if r := acquireOnce(t, s, t0, false, store.Item{Dimension: "v#tpm", Cost: cost}); !r.Granted {
			t.Errorf("acquire %d: %+v", cost, r)
		}
	}
	refund := func(t *testing.T, s *Store, n int64) {
		t.Helper()
		if _, err := s.Adjust(ctx, store.AdjustRequest{Now: t0, ID: store.NewLeaseID(), Dimension: "v#tpm", Delta: -n, Held: 1000, ExpiresAt: t0.Add(time.Hour)}); err != nil {
			t.Error(err)
		}
	}
	var pending store.ReserveResult
	var pendingID store.LeaseID
	cases := []struct {
		name    string
		setup   func(t *testing.T, s *Store) // no fault
		op      func(t *testing.T, s *Store) // its first write's response is lost
		between func(t *testing.T, other *Store)
		want    int64 // millitokens afterwards
	}{
		{"penalize by half", nil, func(t *testing.T, s *Store) {
			if _, err := s.Penalize(ctx, store.PenalizeRequest{Now: t0, Dimension: "v#tpm", FactorMilli: 500}); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, o *Store) { take(t, o, 100) }, 400_000},
		{"refund 200 of 500", func(t *testing.T, s *Store) { take(t, s, 500) }, func(t *testing.T, s *Store) {
			if _, err := s.Adjust(ctx, store.AdjustRequest{Now: t0, ID: store.NewLeaseID(), Dimension: "v#tpm", Delta: -200, Held: 500, ExpiresAt: t0.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, o *Store) { take(t, o, 100) }, 600_000},
		{"unrecorded acquire of 300", nil, func(t *testing.T, s *Store) { take(t, s, 300) },
			func(t *testing.T, o *Store) { take(t, o, 100) }, 600_000},
		{"reset to full", func(t *testing.T, s *Store) { take(t, s, 500) }, func(t *testing.T, s *Store) {
			if err := s.PutBucket(ctx, store.PutBucketRequest{Now: t0, Bucket: tpm, Reset: true}); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, o *Store) { take(t, o, 100) }, 900_000},
		{"unrecorded cancel of 400", func(t *testing.T, s *Store) {
			take(t, s, 1000)
			pendingID = store.NewLeaseID()
			err := s.Reserve(ctx, &store.ReserveRequest{Now: t0, Items: []store.Item{{Dimension: "v#tpm", Cost: 400}}, ID: pendingID, TTL: time.Hour, MaxWait: time.Hour}, &pending)
			if err != nil || !pending.Granted {
				t.Fatalf("reserve: %+v, %v", pending, err)
			}
		}, func(t *testing.T, s *Store) {
			res, err := s.Cancel(ctx, store.CancelRequest{Now: t0, ID: pendingID, Items: []store.Item{{Dimension: "v#tpm", Cost: 400}}, ValidAt: pending.ValidAt})
			if err != nil || len(res.Returned) != 1 || res.Returned[0].Amount != 400_000 {
				t.Errorf("Cancel = %+v, %v; want 400000 back", res, err)
			}
		}, func(t *testing.T, o *Store) { refund(t, o, 100) }, 100_000},
	}
	for _, tc := range cases {
		for _, reset := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/reset=%t", tc.name, reset), func(t *testing.T) {
				l := &lossy{base: http.DefaultTransport}
				db := newClient(func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: l} })
				table := newTable(t, db)
				s := openStore(t, db, table)
				other := openStore(t, newClient(), table)
				put(t, s, t0, tpm)
				if tc.setup != nil {
					tc.setup(t, s)
				}
				l.mu.Lock()
				l.between = func() { tc.between(t, other) }
				l.mu.Unlock()
				l.arm("*", 1, reset)
				tc.op(t, s)
				if sent := l.sentWrites(); sent < 2 {
					t.Fatalf("%d writes sent: the fault did not make the SDK retry", sent)
				}
				st, err := other.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{"v#tpm"}})
				if err != nil {
					t.Fatal(err)
				}
				if st[0].Tokens != tc.want {
					t.Errorf("after a %s retried by the SDK with another writer in between: %d millitokens, want %d", tc.name, st[0].Tokens, tc.want)
				}
			})
		}
	}
}

// TestRetriedDeleteBucket: a deletion whose response is lost after
// DynamoDB applied it, sent again by the SDK, is answered as the deletion
// it was, not as a missing bucket.
func TestRetriedDeleteBucket(t *testing.T) {
	for _, reset := range []bool{false, true} {
		t.Run(fmt.Sprintf("reset=%t", reset), func(t *testing.T) {
			l := &lossy{base: http.DefaultTransport}
			db := newClient(func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: l} })
			s := openStore(t, db, newTable(t, db))
			put(t, s, t0, store.Bucket{Name: "v#gone", Config: bucket.PerPeriod(bucket.Requests, 10, time.Minute)})
			l.arm("*", 1, reset)
			err := s.DeleteBucket(context.Background(), store.DeleteBucketRequest{Name: "v#gone"})
			if sent := l.sentWrites(); sent < 2 {
				t.Fatalf("%d writes sent: the fault did not make the SDK retry", sent)
			}
			if err != nil {
				t.Errorf("DeleteBucket retried by the SDK = %v, want nil (it deleted the bucket)", err)
			}
			if _, err := s.Peek(context.Background(), store.PeekRequest{Now: t0, Dimensions: []string{"v#gone"}}); !errors.Is(err, store.ErrUnknownDimension) {
				t.Errorf("Peek after the deletion = %v, want the bucket gone", err)
			}
		})
	}
}

// TestLostResponseThroughProxy is the lost response at the TCP level: a
// loopback proxy in front of DynamoDB Local forwards the next write, lets
// another store write the same row, then throws the response away and
// closes the connection; the SDK's retryer sends the write again on a new
// connection. A refund and a penalty still apply once.
func TestLostResponseThroughProxy(t *testing.T) {
	p, err := faultproxy.New(strings.TrimPrefix(server.Endpoint, "http://"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	db := newClient(func(o *dynamodb.Options) { o.BaseEndpoint = aws.String("http://" + p.Addr()) })
	table := newTable(t, db)
	s := openStore(t, db, table)
	other := openStore(t, newClient(), table)
	ctx := context.Background()
	put(t, s, t0, store.Bucket{Name: "v#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1000, time.Hour)})
	if r := acquireOnce(t, s, t0, false, store.Item{Dimension: "v#tpm", Cost: 500}); !r.Granted {
		t.Fatalf("acquire: %+v", r)
	}
	// lose arms the proxy for the next write (an UpdateItem or a
	// TransactWriteItems) and reports how many responses it dropped.
	lose := func() func() int {
		var mu sync.Mutex
		armed, dropped := 0, 0
		p.SetHook(func(conn int, dir faultproxy.Dir, chunk []byte) faultproxy.Verdict {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case dir == faultproxy.ToServer && dropped == 0 && armed == 0 &&
				(strings.Contains(string(chunk), "DynamoDB_20120810.UpdateItem") || strings.Contains(string(chunk), "DynamoDB_20120810.TransactWriteItems")):
				armed = conn
			case dir == faultproxy.ToClient && conn == armed:
				armed, dropped = 0, 1
				if r := acquireOnce(t, other, t0, false, store.Item{Dimension: "v#tpm", Cost: 100}); !r.Granted {
					t.Errorf("the other store's acquire: %+v", r)
				}
				return faultproxy.Verdict{Drop: true, Close: true}
			}
			return faultproxy.Verdict{}
		})
		return func() int { mu.Lock(); defer mu.Unlock(); return dropped }
	}
	tokens := func() int64 {
		t.Helper()
		st, err := s.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{"v#tpm"}})
		if err != nil {
			t.Fatal(err)
		}
		return st[0].Tokens
	}
	lost := lose()
	if _, err := s.Adjust(ctx, store.AdjustRequest{Now: t0, ID: store.NewLeaseID(), Dimension: "v#tpm", Delta: -200, Held: 500, ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if lost() != 1 {
		t.Fatal("no response was lost")
	}
	if got := tokens(); got != 600_000 {
		t.Errorf("after settling 500 to 300 with the response lost and 100 taken meanwhile: %d millitokens, want 600000", got)
	}
	// s remembers the row as its settlement wrote it, before the other
	// store's acquisition: its penalty's first write would lose that race,
	// and the response lost would be that of a write that applied nothing.
	// Let it start from the row as it is.
	s.forget("v#tpm")
	lost = lose()
	if _, err := s.Penalize(ctx, store.PenalizeRequest{Now: t0, Dimension: "v#tpm", FactorMilli: 500}); err != nil {
		t.Fatal(err)
	}
	if lost() != 1 {
		t.Fatal("no response was lost")
	}
	if got := tokens(); got != 200_000 {
		t.Errorf("after a ×0.5 penalty with the response lost and 100 taken meanwhile: %d millitokens, want 200000", got)
	}
}
