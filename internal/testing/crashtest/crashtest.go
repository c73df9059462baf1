// Package crashtest holds the crash-recovery test shared by the stores that
// run on a server: child processes, re-executed from the test binary, take
// concurrent slots and are SIGKILLed while holding them; racing reconcilers
// then restore every abandoned slot exactly once, while a sampler checks
// throughout that the balance plus the held leases equals the capacity.
//
// A store's test package wires it in twice: its TestMain calls Child first
// (a child process never reaches the tests), and its TestCrashRecovery
// calls Run with a store on the server and the address a child needs to
// open the same store.
package crashtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ontopix/sluice/store"
)

// Dimension is the concurrent-slots bucket the test creates and the
// children acquire.
const Dimension = "crash#concurrent"

// childSlots is how many acquisitions a child attempts; it releases the
// second one and holds the others.
const childSlots = 3

// t0 is the caller clock of every request: fixed, so that the leases
// expire only when the reconcilers say so.
func t0() time.Time { return time.UnixMilli(1_700_000_000_000) }

// Config says how a store takes part in the crash-recovery test.
type Config struct {
	// Env names the environment variable that carries the address to a
	// child process; its presence makes the test binary act as a child.
	// Required.
	Env string

	// Open opens the store in a child process, given the address passed
	// to Run. The store must honour the Now passed in requests. Required.
	Open func(addr string) (store.Store, error)

	// Capacity is the number of concurrent slots; 0 means 7.
	Capacity int

	// Children is the number of child processes per round; 0 means 5.
	Children int

	// Sample reads the bucket's balance in millitokens and the number of
	// leases holding it; nil means Peek at the test's clock.
	Sample func(ctx context.Context, s store.Store) (millitokens int64, held int, err error)
}

func (c Config) capacity() int64 {
	if c.Capacity == 0 {
		return 7
	}
	return int64(c.Capacity)
}

func (c Config) children() int {
	if c.Children == 0 {
		return 5
	}
	return c.Children
}

func (c Config) sample(ctx context.Context, s store.Store) (int64, int, error) {
	if c.Sample != nil {
		return c.Sample(ctx, s)
	}
	return peek(ctx, s)
}

// peek reads the balance and the active leases of Dimension.
func peek(ctx context.Context, s store.Store) (int64, int, error) {
	st, err := s.Peek(ctx, store.PeekRequest{Now: t0(), Dimensions: []string{Dimension}})
	if err != nil {
		return 0, 0, fmt.Errorf("peek %s: %w", Dimension, err)
	}
	return st[0].Tokens, st[0].ActiveLeases, nil
}

// Child runs the child's part when the environment variable cfg.Env is
// set, and then returns its exit code and true; otherwise it returns 0 and
// false at once. Call it first in TestMain:
//
//	if code, ok := crashtest.Child(cfg); ok {
//		os.Exit(code)
//	}
func Child(cfg Config) (int, bool) {
	addr := os.Getenv(cfg.Env)
	if addr == "" {
		return 0, false
	}
	if err := runChild(cfg, addr); err != nil {
		fmt.Println("ERR", err)
		return 1, true
	}
	select {} // held until SIGKILL
}

// runChild acquires concurrent slots (caller clock at t0, retrying on
// contention), releases every other one, reports each step on stdout and
// says READY.
func runChild(cfg Config, addr string) error {
	s, err := cfg.Open(addr)
	if err != nil {
		return err
	}
	ctx := context.Background()
	for i := range childSlots {
		id := store.NewLeaseID()
		var res store.AcquireResult
		req := &store.AcquireRequest{Now: t0(), Items: []store.Item{{Dimension: Dimension}}, ID: id, TTL: time.Minute, Caller: "child"}
		for {
			err = s.Acquire(ctx, req, &res)
			if !errors.Is(err, store.ErrContention) {
				break
			}
		}
		if err != nil {
			return err
		}
		if !res.Granted {
			break
		}
		fmt.Println("HELD", id)
		if i == 1 {
			rel, err := s.Release(ctx, store.ReleaseRequest{Now: t0(), ID: id})
			if err != nil {
				return fmt.Errorf("release %s: %w", id, err)
			}
			if !rel.Released {
				return fmt.Errorf("release %s: %+v", id, rel)
			}
			fmt.Println("RELEASED", id)
		}
	}
	fmt.Println("READY")
	return nil
}
