package lab

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ontopix/sluice/internal/cmd/benchrun"
	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

// overReserving is a deliberately broken store: every third reservation
// it would have to make wait, it makes valid at once without debiting
// anything.
type overReserving struct {
	contract.Forward
	n atomic.Int64
}

func (s *overReserving) Reserve(ctx context.Context, req *store.ReserveRequest, res *store.ReserveResult) error {
	if err := s.Forward.Reserve(ctx, req, res); err != nil || (res.Granted && res.Wait == 0) {
		return err
	}
	if s.n.Add(1)%3 == 1 {
		if res.Granted {
			return nil // already debited: leave it
		}
		res.Granted, res.Wait, res.ValidAt, res.ExpiresAt = true, 0, req.Now, req.Now.Add(req.TTL)
	}
	return nil
}

const mixLimits = "dimensions:\n  bench#tpm:\n    type: tokens\n    capacity: 600\n    per: 1s\n"

func TestBenchMixBothWaits(t *testing.T) {
	p := t.TempDir() + "/limits.yaml"
	if err := os.WriteFile(p, []byte(mixLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, url: "memory://", mem: memstore.New()}
	out := e.ok("bench", "--limits", p, "--processes", "1", "--duration", "1500ms", "--dimension", "bench#tpm",
		"--mix", "20x4,300x1", "--wait", "both", "--timeout", "5s", "-o", "json")
	var reps map[string]benchrun.Report
	if err := json.Unmarshal([]byte(out), &reps); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, w := range []string{"poll", "reserve"} {
		r, ok := reps[w]
		if !ok || !r.OK || r.Wait != w || len(r.Classes) != 2 || r.Granted == 0 {
			t.Fatalf("%s: %+v", w, r)
		}
		if got := r.Classes[0].Granted + r.Classes[1].Granted; got != r.Granted {
			t.Errorf("%s: classes granted %d, run %d", w, got, r.Granted)
		}
		if r.Classes[1].FCFS <= 0 || len(r.Classes[0].PerWorker) != 4 || r.Calls < r.Granted {
			t.Errorf("%s: classes %+v, calls %d", w, r.Classes, r.Calls)
		}
	}
	if r := reps["reserve"]; r.Timeouts != 0 || r.Classes[1].Granted == 0 {
		t.Errorf("reserve: %d timeouts, large class granted %d; want none, some", r.Timeouts, r.Classes[1].Granted)
	}
	// A wait that ends with a reservation takes one store call; each of
	// the 5 workers makes one more that fails fast when the run's end is
	// nearer than its slot.
	if r := reps["reserve"]; r.Calls > r.Granted+5 {
		t.Errorf("reserve: %d store calls for %d grants, want at most one each and 5 more", r.Calls, r.Granted)
	}
	if _, errs, code := e.run("bench", "--dimension", "bench#tpm", "--dimension", "bench#rpm", "--mix", "1x1"); code != clikit.ExitUsage || !strings.Contains(errs, "--mix") {
		t.Errorf("mix with two dimensions: %d %s", code, errs)
	}
	if _, errs, code := e.run("bench", "--dimension", "bench#tpm", "--mix", "1y1"); code != clikit.ExitUsage || !strings.Contains(errs, "COSTxWORKERS") {
		t.Errorf("bad mix: %d %s", code, errs)
	}
	if _, errs, code := e.run("bench", "--dimension", "bench#tpm", "--wait", "sometimes"); code != clikit.ExitUsage || !strings.Contains(errs, "--wait") {
		t.Errorf("bad wait: %d %s", code, errs)
	}
}

// The verdict checks reservations at their valid instants: a store that
// makes some reservations valid too early is caught. The bucket holds 5
// and earns 5 every 100 ms, so 8 workers reserve from their first calls
// however fast the machine runs, with waits well inside the run (with a
// large bucket, a slow run granted everything at once and never reserved:
// 2 of 20 runs under load).
func TestBenchCatchesOverReservation(t *testing.T) {
	p := t.TempDir() + "/limits.yaml"
	if err := os.WriteFile(p, []byte("dimensions:\n  bench#rpm:\n    type: requests\n    capacity: 5\n    per: 100ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, url: "memory://"}
	broken := &overReserving{Forward: contract.Forward{Store: memstore.New()}}
	out, errs, code := runWith(t, e, broken, "bench", "--limits", p, "--processes", "1", "--workers", "8",
		"--duration", "300ms", "--wait", "reserve", "--dimension", "bench#rpm")
	if code != clikit.ExitError || !strings.Contains(out, "EXCEEDED") || !strings.Contains(errs, "limit exceeded: bench#rpm by") {
		t.Errorf("exit %d\n%s\n%s", code, out, errs)
	}
}
