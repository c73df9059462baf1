package sluice_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// TestClockSkewRefusedAndLogged runs two clients on one store whose clocks
// are 2 s apart: after the one ahead drains a bucket, the one behind is
// refused with the wait until its clock is within the maximum skew, and
// logs a clock.skew event with its lag.
func TestClockSkewRefusedAndLogged(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	ahead, err := sluice.New(st, sluice.WithClock(&manualClock{t: t0.Add(2 * time.Second)}))
	if err != nil {
		t.Fatal(err)
	}
	if err := ahead.PutBucket(ctx, sluice.Bucket{Name: "skew#rpm", Config: bucket.PerPeriod(bucket.Requests, 60, time.Minute)}); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	log := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	behind, err := sluice.New(st, sluice.WithClock(&manualClock{t: t0}), sluice.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := ahead.Acquire(ctx, "skew#rpm", sluice.WithCost(1)); err != nil || !res.Granted() {
		t.Fatalf("acquire ahead = %v, %v", res.Outcome, err)
	}
	res, err := behind.Acquire(ctx, "skew#rpm", sluice.WithCost(1))
	if err != nil || res.Granted() || res.RetryIn != time.Second {
		t.Fatalf("acquire 2 s behind = %v (retry in %s), %v; want refused, retry in 1s", res.Outcome, res.RetryIn, err)
	}
	var ev struct {
		Msg     string `json:"msg"`
		Behind  int64  `json:"behind"`
		RetryIn int64  `json:"retry_in"`
	}
	out.mu.Lock()
	line, _, _ := strings.Cut(out.buf.String(), "\n")
	out.mu.Unlock()
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		t.Fatalf("log %q: %v", line, err)
	}
	if ev.Msg != "clock.skew" || time.Duration(ev.Behind) != 2*time.Second || time.Duration(ev.RetryIn) != time.Second {
		t.Errorf("logged %+v, want clock.skew, behind 2s, retry_in 1s", ev)
	}
}

// nowRecorder is a store whose mutating bucket operations fail with
// ErrContention the first time each is called and record the Now of every
// attempt.
type nowRecorder struct {
	contract.Forward
	mu   sync.Mutex
	nows map[string][]time.Time
}

func (r *nowRecorder) attempt(op string, now time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nows[op] = append(r.nows[op], now)
	if len(r.nows[op]) == 1 {
		return store.ErrContention
	}
	return nil
}

func (r *nowRecorder) Adjust(ctx context.Context, req store.AdjustRequest) (store.Settlement, error) {
	if err := r.attempt("adjust", req.Now); err != nil {
		return store.Settlement{}, err
	}
	return r.Store.Adjust(ctx, req)
}

func (r *nowRecorder) Penalize(ctx context.Context, req store.PenalizeRequest) (store.Penalty, error) {
	if err := r.attempt("penalize", req.Now); err != nil {
		return store.Penalty{}, err
	}
	return r.Store.Penalize(ctx, req)
}

func (r *nowRecorder) Cooldown(ctx context.Context, req store.CooldownRequest) (store.CooldownResult, error) {
	if err := r.attempt("cooldown", req.Now); err != nil {
		return store.CooldownResult{}, err
	}
	return r.Forward.Cooldown(ctx, req)
}

func (r *nowRecorder) Sync(ctx context.Context, req store.SyncRequest) (store.SyncResult, error) {
	if err := r.attempt("sync", req.Now); err != nil {
		return store.SyncResult{}, err
	}
	return r.Forward.Sync(ctx, req)
}

func (r *nowRecorder) PutBucket(ctx context.Context, req store.PutBucketRequest) error {
	if err := r.attempt("put_bucket", req.Now); err != nil {
		return err
	}
	return r.Store.PutBucket(ctx, req)
}

// tickingClock advances by step on every reading.
type tickingClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *tickingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

// TestRetriesDecideAtTheirOwnTime checks that every attempt of a store
// call retried after contention carries a fresh Now: a retry never
// decides at the instant its first attempt was stamped with.
func TestRetriesDecideAtTheirOwnTime(t *testing.T) {
	synctest.Test(t, testRetriesDecideAtTheirOwnTime)
}

func testRetriesDecideAtTheirOwnTime(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	rec := &nowRecorder{Forward: contract.Forward{Store: st}, nows: map[string][]time.Time{}}
	c, err := sluice.New(rec, sluice.WithClock(&tickingClock{t: t0, step: 10 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.PutBucket(ctx, sluice.Bucket{Name: "skew#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1000, time.Minute)}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Acquire(ctx, "skew#tpm", sluice.WithCost(10), sluice.WithRecord())
	if err != nil || !res.Granted() {
		t.Fatalf("acquire = %v, %v", res.Outcome, err)
	}
	if _, err := res.Lease.Settle(ctx, "skew#tpm", 20); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Penalize(ctx, "skew#tpm", 0.5); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sync(ctx, "skew#tpm", 100); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CooldownFor(ctx, "skew#tpm", time.Second); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"put_bucket", "adjust", "penalize", "sync", "cooldown"} {
		nows := rec.nows[op]
		if len(nows) != 2 || !nows[1].After(nows[0]) {
			t.Errorf("%s attempts at %v, want two, the retry later than the first", op, nows)
		}
	}
}
