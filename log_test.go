package sluice_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// events returns the msg of every JSON log line.
func (b *syncBuffer) events(t *testing.T) map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	got := map[string]int{}
	for _, line := range bytes.Split(bytes.TrimSpace(b.buf.Bytes()), []byte("\n")) {
		var ev struct {
			Msg string `json:"msg"`
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		got[ev.Msg]++
	}
	return got
}

// TestLogEvents checks that the SDKs' event names are emitted.
func TestLogEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var out syncBuffer
		log := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
		fs := &faultStore{Forward: contract.Forward{Store: memstore.New()}, err: store.ErrContention, n: 1}
		c, err := sluice.New(fs, sluice.WithLogger(log))
		if err != nil {
			t.Fatal(err)
		}
		putSeedBuckets(t, c)
		res, err := c.Acquire(ctx, "elevenlabs#concurrent") // contention once, then granted
		if err != nil || !res.Granted() {
			t.Fatalf("acquire = %v, %v", res.Outcome, err)
		}
		if err := res.Lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Acquire(ctx, "openai#rpm", sluice.WithCost(100)); err != nil {
			t.Fatal(err)
		}
		if res, _ := c.Acquire(ctx, "openai#rpm"); res.Granted() {
			t.Fatal("granted from an empty bucket")
		}
		if _, err := c.Penalize(ctx, "openai#tpm", 0.5); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Sync(ctx, "openai#tpm", 1000); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CooldownFor(ctx, "openai#tpm", time.Second); err != nil {
			t.Fatal(err)
		}
		if err := c.WithSlot(within(ctx, t, 100*time.Millisecond), "openai#rpm", func(context.Context, *sluice.Lease) error { return nil }); err == nil {
			t.Fatal("WithSlot on an empty bucket did not time out")
		}
		got := out.events(t)
		for _, want := range []string{
			"acquire.contention_retry", "acquire.granted", "release.ok", "acquire.retry_in",
			"penalize.applied", "sync.applied", "cooldown.applied", "slot.timeout",
		} {
			if got[want] == 0 {
				t.Errorf("no %s event; got %v", want, got)
			}
		}
	})
}

// TestLogKeysSnakeCase checks that every key of every event, nested ones
// included, is snake_case, and that a settlement logs a settle event.
func TestLogKeysSnakeCase(t *testing.T) {
	ctx := context.Background()
	var out syncBuffer
	log := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, _, _ := newClient(t, sluice.WithLogger(log))
	res, err := c.AcquireMany(ctx, []sluice.Request{{Dimension: "openai#tpm", Cost: 2000}, {Dimension: "elevenlabs#concurrent", Cost: 1}})
	if err != nil || !res.Granted() {
		t.Fatal(res.Outcome, err)
	}
	if _, err := res.Lease.Settle(ctx, "openai#tpm", 1500); err != nil {
		t.Fatal(err)
	}
	if err := res.Lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var settle map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(out.buf.Bytes()), []byte("\n")) {
		var ev map[string]any
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		checkKeys(t, ev["msg"], ev)
		if ev["msg"] == "settle" {
			settle = ev
		}
	}
	want := map[string]any{"dimension": "openai#tpm", "estimate": 2000.0, "actual": 1500.0, "applied": -500.0}
	for k, v := range want {
		if settle[k] != v {
			t.Errorf("settle event %s = %v, want %v (event %v)", k, settle[k], v, settle)
		}
	}
}

func checkKeys(t *testing.T, msg any, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			for _, r := range k {
				if (r < 'a' || r > 'z') && r != '_' {
					t.Errorf("event %v: key %q is not snake_case", msg, k)
					break
				}
			}
			checkKeys(t, msg, x)
		}
	case []any:
		for _, x := range v {
			checkKeys(t, msg, x)
		}
	}
}
