package crashtest

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/testproc"
	"github.com/ontopix/sluice/store"
)

// rounds is how many times the children are started and killed.
const rounds = 2

// Run is the parent's part: it creates Dimension in s with cfg's capacity,
// then, twice, starts cfg's children with addr in cfg.Env, SIGKILLs them
// with their slots held and has three reconcilers race to restore the
// slots. A sampler checks throughout that the balance plus the held leases
// equals the capacity (never exceeded, nothing restored twice); after each
// round every abandoned slot must have been reclaimed and restored exactly
// once. s must honour the Now passed in requests and be empty.
func Run(t *testing.T, cfg Config, s store.Store, addr string) {
	t.Helper()
	ctx := context.Background()
	capacity := cfg.capacity()
	err := s.PutBucket(ctx, store.PutBucketRequest{Now: t0(), Bucket: store.Bucket{Name: Dimension, Config: bucket.ConcurrentSlots(capacity)}})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	samples := startSampler(t, cfg, s, stop)
	defer func() {
		close(stop)
		if samples() == 0 {
			t.Error("the sampler took no samples")
		}
	}()
	for round := range rounds {
		held := killChildren(t, cfg, addr)
		if len(held) == 0 {
			t.Fatalf("round %d: the children abandoned no slots", round)
		}
		t.Logf("round %d: %d slots abandoned by %d SIGKILLed processes", round, len(held), cfg.children())
		reclaimed, restored := raceReconcilers(t, s)
		if reclaimed != len(held) || restored != len(held) {
			t.Errorf("round %d: reclaimed %d, restored %d, abandoned %d", round, reclaimed, restored, len(held))
		}
		tok, leases, err := cfg.sample(ctx, s)
		if err != nil || tok != capacity*1000 || leases != 0 {
			t.Fatalf("round %d: after reconcile %d millitokens and %d leases, %v", round, tok, leases, err)
		}
	}
}

// startSampler checks the balance plus the held leases against the
// capacity until stop is closed; the function it returns waits for the
// sampler to finish and returns how many samples it took.
func startSampler(t *testing.T, cfg Config, s store.Store, stop <-chan struct{}) func() int64 {
	capacity := cfg.capacity()
	var samples atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			tok, leases, err := cfg.sample(context.Background(), s)
			if err != nil {
				t.Error(err)
				return
			}
			if tok < 0 || tok > capacity*1000 || tok/1000+int64(leases) != capacity {
				t.Errorf("sample: %d millitokens and %d leases, capacity %d", tok, leases, capacity)
			}
			samples.Add(1)
		}
	}()
	return func() int64 {
		wg.Wait()
		return samples.Load()
	}
}

// killChildren starts cfg's children one after the other, collects the
// leases each reports held until it says READY, then SIGKILLs them all.
func killChildren(t *testing.T, cfg Config, addr string) map[string]bool {
	t.Helper()
	held := map[string]bool{}
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = p.Process.Kill() // SIGKILL with slots held
			_ = p.Wait()
		}
	}()
	for range cfg.children() {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), cfg.Env+"="+addr)
		cmd.SysProcAttr = testproc.SysProcAttr(testproc.Attr{DieWithParent: true})
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) > 0 && f[0] == "READY" {
				break
			}
			switch {
			case len(f) == 2 && f[0] == "HELD":
				held[f[1]] = true
			case len(f) == 2 && f[0] == "RELEASED":
				delete(held, f[1])
			default:
				t.Fatalf("child: %s", sc.Text())
			}
		}
	}
	return held
}

// raceReconcilers has three reconcilers, in small batches and after every
// lease expired, restore the abandoned slots; it returns the leases they
// reclaimed and the slots they restored, summed.
func raceReconcilers(t *testing.T, s store.Store) (reclaimed, restored int) {
	var wg sync.WaitGroup
	var nRestored, nReclaimed atomic.Int64
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				r, err := s.Reconcile(context.Background(), store.ReconcileRequest{Now: t0().Add(2 * time.Minute), Limit: 2})
				if err != nil {
					t.Error(err)
					return
				}
				nRestored.Add(int64(r.Restored))
				nReclaimed.Add(int64(r.Reclaimed))
				if r.Restored == 0 && !r.More {
					return
				}
			}
		}()
	}
	wg.Wait()
	return int(nReclaimed.Load()), int(nRestored.Load())
}
