package redisstore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// childEnv carries "addr prefix" to a re-executed test binary that acts as
// a crashing client (see crashChild).
const childEnv = "SLUICE_REDISSTORE_CRASH_CHILD"

const crashDim = "crash#concurrent"

// crashChild acquires concurrent slots (caller clock, at t0), releases
// every other one, reports each step on stdout, says READY and then blocks
// until the parent SIGKILLs it with its slots held.
func crashChild() int {
	f := strings.Fields(os.Getenv(childEnv))
	c := redis.NewClient(&redis.Options{Addr: f[0]})
	s, err := New(c, WithPrefix(f[1]), WithCallerClock())
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	ctx := context.Background()
	for i := range 3 {
		id := store.NewLeaseID()
		var res store.AcquireResult
		req := &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: crashDim}}, ID: id, TTL: time.Minute, Caller: "child"}
		if err := s.Acquire(ctx, req, &res); err != nil {
			fmt.Println("ERR", err)
			return 1
		}
		if !res.Granted {
			break
		}
		fmt.Println("HELD", id)
		if i == 1 {
			rel, err := s.Release(ctx, store.ReleaseRequest{Now: t0, ID: id})
			if err != nil || !rel.Released {
				fmt.Println("ERR release", rel, err)
				return 1
			}
			fmt.Println("RELEASED", id)
		}
	}
	fmt.Println("READY")
	select {} // held until SIGKILL
}

// TestCrashRecovery SIGKILLs child processes holding concurrent slots and
// checks, with a sampler running throughout, that the balance plus the
// recorded leases always equals the capacity (never exceeded, nothing
// restored twice), and that racing reconcilers restore every abandoned slot
// exactly once.
func TestCrashRecovery(t *testing.T) {
	const capacity, children = 7, 5
	s := newStore(t)
	ctx := context.Background()
	put(t, s, t0, store.Bucket{Name: crashDim, Config: bucket.ConcurrentSlots(capacity)})

	stop := make(chan struct{})
	var samples atomic.Int64
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			st, err := s.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{crashDim}})
			if err != nil {
				t.Error(err)
				return
			}
			if tok := st[0].Tokens; tok < 0 || tok > capacity*1000 || tok/1000+int64(st[0].ActiveLeases) != capacity {
				t.Errorf("sample: %d millitokens and %d leases, capacity %d", tok, st[0].ActiveLeases, capacity)
			}
			samples.Add(1)
		}
	}()

	for round := range 2 {
		held := map[string]bool{}
		var procs []*exec.Cmd
		for range children {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+standalone.Addr+" "+s.prefix)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			procs = append(procs, cmd)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if f[0] == "READY" {
					break
				}
				switch f[0] {
				case "HELD":
					held[f[1]] = true
				case "RELEASED":
					delete(held, f[1])
				default:
					t.Fatalf("child: %s", sc.Text())
				}
			}
		}
		for _, p := range procs {
			_ = p.Process.Kill() // SIGKILL with slots held
			_ = p.Wait()
		}
		if len(held) == 0 {
			t.Fatalf("round %d: the children abandoned no slots", round)
		}
		t.Logf("round %d: %d slots abandoned by %d SIGKILLed processes", round, len(held), children)
		// Racing reconcilers, small batches, after every lease expired.
		var wg sync.WaitGroup
		var restored, reclaimed atomic.Int64
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					r, err := s.Reconcile(ctx, store.ReconcileRequest{Now: t0.Add(2 * time.Minute), Limit: 2})
					if err != nil {
						t.Error(err)
						return
					}
					restored.Add(int64(r.Restored))
					reclaimed.Add(int64(r.Reclaimed))
					if r.Restored == 0 && !r.More {
						return
					}
				}
			}()
		}
		wg.Wait()
		if int(reclaimed.Load()) != len(held) || int(restored.Load()) != len(held) {
			t.Errorf("round %d: reclaimed %d, restored %d, abandoned %d", round, reclaimed.Load(), restored.Load(), len(held))
		}
		st, err := s.Peek(ctx, store.PeekRequest{Now: t0, Dimensions: []string{crashDim}})
		if err != nil || st[0].Tokens != capacity*1000 || st[0].ActiveLeases != 0 {
			t.Fatalf("round %d: after reconcile %+v %v", round, st, err)
		}
	}
	close(stop)
	sampler.Wait()
	if samples.Load() == 0 {
		t.Error("the sampler took no samples")
	}
}
