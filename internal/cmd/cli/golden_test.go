package cli

import (
	"strings"
	"testing"
	"time"
)

// goldenState puts three buckets on a memory store, takes from them and
// moves the clock, so that every status column has something to show.
func goldenState(t *testing.T) *testEnv {
	e := memEnv(t)
	e.ok("bucket", "put", "openai#rpm", "--type", "requests", "--capacity", "500", "--per", "1m")
	e.ok("bucket", "put", "openai#tpm", "--type", "tokens", "--capacity", "40000", "--refill", "30000", "--per", "1m", "--cost", "1000")
	e.ok("bucket", "put", "elevenlabs#concurrent", "--type", "concurrent", "--capacity", "5")
	e.ok("acquire", "openai#rpm:100", "openai#tpm:25000", "--hold", "10s")
	e.ok("acquire", "elevenlabs#concurrent:2", "--hold", "30s")
	e.advance(1500 * time.Millisecond)
	return e
}

func TestGoldenStatus(t *testing.T) {
	e := goldenState(t)
	golden(t, "status.txt", e.ok("status"))
	golden(t, "status.json", e.ok("status", "--output", "json"))
	golden(t, "bucket_list.json", e.ok("bucket", "list", "-o", "json"))
	golden(t, "status_watch.txt", e.ok("status", "--watch", "--count", "2", "--interval", "100ms", "openai#rpm"))
}

// TestGoldenStatusStores checks status against one golden file on every
// store, in a state that does not depend on when it is read: time-based
// buckets full, a concurrent bucket with slots held.
func TestGoldenStatusStores(t *testing.T) {
	stores(t, func(t *testing.T, e *testEnv) {
		e.ok("bucket", "put", "openai#rpm", "--type", "requests", "--capacity", "500", "--per", "1m")
		e.ok("bucket", "put", "openai#tpm", "--type", "tokens", "--capacity", "40000", "--refill", "30000", "--per", "1m", "--cost", "1000")
		e.ok("bucket", "put", "elevenlabs#concurrent", "--type", "concurrent", "--capacity", "5")
		e.ok("acquire", "elevenlabs#concurrent:2", "--hold", "1h")
		golden(t, "status_stores.txt", e.ok("status"))
	})
}

// TestGoldenCooldown: a running cooldown shows in status (a column, only
// then), status -o json and bucket get, and goes away when it ends.
func TestGoldenCooldown(t *testing.T) {
	e := goldenState(t)
	golden(t, "cooldown.json", e.ok("cooldown", "openai#rpm", "--for", "20s", "-o", "json"))
	golden(t, "sync.json", e.ok("sync", "openai#tpm", "--remaining", "10000", "-o", "json"))
	golden(t, "status_cooldown.txt", e.ok("status"))
	golden(t, "status_cooldown.json", e.ok("status", "openai#rpm", "-o", "json"))
	golden(t, "bucket_get_cooldown.txt", e.ok("bucket", "get", "openai#rpm"))
	e.advance(20 * time.Second)
	for _, args := range [][]string{{"status"}, {"status", "-o", "json"}, {"bucket", "get", "openai#rpm"}} {
		if out := e.ok(args...); strings.Contains(strings.ToLower(out), "cooldown") {
			t.Errorf("%v after the cooldown ended still shows it:\n%s", args, out)
		}
	}
}
