package clients_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/testing/fleetcheck"
	"github.com/ontopix/sluice/internal/testing/redistest"
	"github.com/ontopix/sluice/service"
	"github.com/ontopix/sluice/store/redisstore"
)

// The mixed fleet's limits: 20 requests a second with a burst of 5, and 3
// slots, shared by every process.
var (
	mixRPM   = sluice.PerPeriod(sluice.Requests, 20, time.Second, sluice.Burst(5))
	mixSlots = sluice.ConcurrentLimit(3)
)

// history collects the fleet's events, in Unix milliseconds (one clock:
// every process runs on this machine).
type history struct {
	mu    sync.Mutex
	rpm   []fleetcheck.Event
	slots []fleetcheck.Event
	by    map[string]int // grants per language
}

func (h *history) grant(lang, id string, lo, hi int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rpm = append(h.rpm, fleetcheck.Event{Kind: fleetcheck.Grant, Lo: lo, Hi: hi, Cost: 1})
	h.slots = append(h.slots, fleetcheck.Event{Kind: fleetcheck.Grant, Lo: lo, Hi: hi, Cost: 1, Lease: id})
	h.by[lang]++
}

func (h *history) release(id string, lo int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.slots = append(h.slots, fleetcheck.Event{Kind: fleetcheck.Release, Lo: lo, Hi: lo, Lease: id})
}

// TestMixedFleet shares one limit between Go processes that link the
// library (on Redis directly), a Python process and a Node process (both
// through sluice serve on the same Redis), every worker waiting in line,
// and checks the whole fleet's history with the fleet harness's window
// checker: no window admits more than the limit allows, and no more slots
// are held than exist; the fleet uses nearly all of the limit, and no
// language is starved by the others' shorter path to the store.
func TestMixedFleet(t *testing.T) {
	const seconds = 4
	srv := redistest.New(t)
	newStore := func() *redisstore.Store {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { _ = rdb.Close() })
		st, err := redisstore.New(rdb, redisstore.WithPrefix("mix:"))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	svcClient, err := sluice.New(newStore())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svcClient.Close() })
	ctx := context.Background()
	for name, cfg := range map[string]sluice.Bucket{"rpm": {Name: "mix#rpm", Config: mixRPM}, "slots": {Name: "mix#slots", Config: mixSlots}} {
		if err := svcClient.PutBucket(ctx, cfg); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	s, err := service.New(svcClient)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	buildTypeScript(t, hs.URL)

	h := &history{by: map[string]int{}}
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 2 { // two Go processes, two workers each
		c, err := sluice.New(newStore())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				goWorker(t, c, h, start.Add(seconds*time.Second), uint64(i*2+w))
			}()
		}
	}
	lines := make(chan string, 4096)
	for _, p := range []struct {
		lang, dir, name string
		args            []string
	}{
		{"python", "python", python, []string{"tests/mixed_worker.py", fmt.Sprint(seconds), "3"}},
		{"typescript", "typescript", "node", []string{"dist/tools/mixed-worker.js", fmt.Sprint(seconds), "3"}},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(p.name, p.args...)
			cmd.Dir = p.dir
			cmd.Env = append(os.Environ(), "SLUICE_URL="+hs.URL)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Errorf("%s: %v\n%s", p.lang, err, stderr.Bytes())
				return
			}
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				lines <- p.lang + " " + sc.Text()
			}
		}()
	}
	wg.Wait()
	close(lines)
	for l := range lines {
		var lang string
		var ev struct {
			Grant, Release string
			Lo, Hi         float64
		}
		n, _ := fmt.Sscan(l, &lang)
		if n != 1 || json.Unmarshal([]byte(l[len(lang)+1:]), &ev) != nil {
			t.Fatalf("malformed line %q", l)
		}
		if ev.Grant != "" {
			// Rounded outward: the interval must contain the instant.
			h.grant(lang, ev.Grant, int64(ev.Lo), int64(ev.Hi)+1)
		} else {
			h.release(ev.Release, int64(ev.Lo))
		}
	}
	for _, d := range []fleetcheck.Dimension{
		{Name: "mix#rpm", Limit: fleetcheck.Limit{Capacity: 5, Amount: 20, PeriodMs: 1000}, Events: h.rpm},
		{Name: "mix#slots", Limit: fleetcheck.Limit{Capacity: 3, Concurrent: true}, Events: h.slots},
	} {
		r, err := fleetcheck.Check(d)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %v", d.Name, r)
		if r.Excess > 0 {
			t.Errorf("%s: over the limit: %v", d.Name, r)
		}
	}
	end := start.Add(seconds * time.Second).UnixMilli()
	use := fleetcheck.TimeUse(fleetcheck.Dimension{Limit: fleetcheck.Limit{Capacity: 5, Amount: 20, PeriodMs: 1000}, Events: h.rpm}, start.UnixMilli(), end)
	t.Logf("grants by language: %v; requests use %.1f %%", h.by, 100*use)
	if use < 0.9 {
		t.Errorf("requests use %.1f %% of the limit: the fleet must use nearly all of it", 100*use)
	}
	// Waiting in line is first come, first served: each language's share
	// of the grants follows its share of the workers (4 Go, 3 Python, 3
	// Node). Half of it is the floor, leaving room for a process's start.
	total := h.by["go"] + h.by["python"] + h.by["typescript"]
	for lang, workers := range map[string]int{"go": 4, "python": 3, "typescript": 3} {
		if fair := total * workers / 10; h.by[lang] < fair/2 {
			t.Errorf("%s got %d of %d grants, less than half its fair share %d: the fleet must share the limit, not starve a member", lang, h.by[lang], total, fair)
		}
	}
}

// goWorker is a Go process's worker: the same loop as the Python and Node
// workers, on the library. A grant's Lo is the later of the call's start
// and the instant the lease took effect.
func goWorker(t *testing.T, c *sluice.Client, h *history, until time.Time, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	reqs := []sluice.Request{{Dimension: "mix#rpm", Cost: 1}, {Dimension: "mix#slots", Cost: 1}}
	for time.Now().Before(until) {
		lo := time.Now().UnixMilli()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		lease, err := c.Wait(ctx, reqs, sluice.WithTTL(10*time.Second))
		cancel()
		hi := time.Now().UnixMilli() + 1
		var timeout *sluice.SlotTimeoutError
		if errors.As(err, &timeout) {
			continue
		}
		if err != nil {
			t.Error(err)
			return
		}
		lo = min(max(lo, lease.CreatedAt().UnixMilli()), hi)
		h.grant("go", lease.ID(), lo, hi)
		time.Sleep(10*time.Millisecond + time.Duration(rng.IntN(20))*time.Millisecond)
		h.release(lease.ID(), time.Now().UnixMilli())
		if err := lease.Release(context.Background()); err != nil {
			t.Error(err)
			return
		}
	}
}
