package storetest

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// linearizeClients is the number of concurrent clients in each recorded
// history, and linearizeOps the operations each runs.
const (
	linearizeClients = 4
	linearizeOps     = 20
)

// testLinearizable records concurrent histories of acquisitions, releases,
// adjustments, extensions, cooldowns, syncs and peeks from several clients, with a reconcile
// between phases, (each
// on its own store handle when the harness opens more than one) and checks
// with porcupine that each history is linearizable with respect to the
// reference model: that some order of the operations, consistent with
// their real-time order, gives every client exactly the results it got.
func testLinearizable(t *testing.T, h Harness) {
	raw := h.NewStore(t)
	s := contract.Checked(raw)
	handles := []store.Store{s}
	for range linearizeClients - 1 {
		if h.OpenHandle != nil {
			handles = append(handles, contract.Checked(h.OpenHandle(t, raw)))
		} else {
			handles = append(handles, s)
		}
	}
	rounds := h.LinearizeRounds
	if rounds <= 0 {
		rounds = 5
	}
	mc := &modelChecker{h: h, s: s}
	for round := range rounds {
		res, hist := mc.linearizable(handles, uint64(round+1))
		switch res {
		case porcupine.Ok:
		case porcupine.Unknown:
			t.Logf("round %d: the linearizability check timed out (%d operations): inconclusive", round, len(hist))
		default:
			t.Fatalf("round %d: history of %d operations is not linearizable against the model; its longest linearizable prefix, then the operations that could not follow it:\n%s", round, len(hist), describeHistory(hist))
		}
	}
	t.Logf("%d concurrent histories of %d clients x %d operations are linearizable", rounds, linearizeClients, linearizeOps)
}

// linearizable records one concurrent history and checks it.
func (mc *modelChecker) linearizable(handles []store.Store, seed uint64) (porcupine.CheckResult, []porcupine.Operation) {
	hist, init, r := recordHistory(mc, handles, seed)
	defer mc.cleanup(r, nil)
	res, info := porcupine.CheckOperationsVerbose(porcupineModel(init), hist, 30*time.Second)
	if res == porcupine.Illegal {
		hist = longestPartial(init, hist, info)
	}
	return res, hist
}

// longestPartial returns, for an illegal history, its longest partial
// linearization followed by the operations that could not be placed after
// it: the place to start reading.
func longestPartial(init *model, hist []porcupine.Operation, info porcupine.LinearizationInfo) []porcupine.Operation {
	var best []porcupine.Operation
	for _, part := range info.PartialLinearizationsOperations() {
		for _, lin := range part {
			if len(lin) > len(best) {
				best = lin
			}
		}
	}
	placed := map[any]bool{}
	for _, op := range best {
		placed[op.Input.(Step).Lease+fmt.Sprint(op.ClientId, op.Call)] = true
	}
	out := slices.Clone(best)
	for _, op := range hist {
		if !placed[op.Input.(Step).Lease+fmt.Sprint(op.ClientId, op.Call)] {
			op.Metadata = "not placed"
			out = append(out, op)
		}
	}
	return out
}

func porcupineModel(init *model) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return init },
		Step: func(state, input, output any) (bool, any) {
			if output.(Expect).Error == "ErrContention" {
				// An optimistic store that lost its races too many times
				// changed nothing; the Client backs off and retries.
				return true, state
			}
			m := state.(*model).clone()
			got := m.apply(input.(Step))
			return sameExpect(got, output.(Expect)), m
		},
		Equal: func(a, b any) bool { return a.(*model).key() == b.(*model).key() },
		Hash: func(state any) uint64 {
			h := fnv.New64a()
			h.Write([]byte(state.(*model).key()))
			return h.Sum64()
		},
		DescribeOperation: func(input, output any) string {
			return fmt.Sprintf("%s -> %s", jsonString(input), jsonString(output))
		},
	}
}

// recordHistory sets up a round's buckets, runs the clients concurrently
// and returns their history, the model of the state they started from and
// a runner for cleanup.
func recordHistory(mc *modelChecker, handles []store.Store, seed uint64) ([]porcupine.Operation, *model, *runner) {
	mc.runs++
	baseMs := Base.UnixMilli() + int64(mc.runs)*int64(48*time.Hour/time.Millisecond)
	prefix := fmt.Sprintf("lin/%d/", mc.runs)
	v1, v2 := fmt.Sprintf("l%d", mc.runs), fmt.Sprintf("k%d", mc.runs)
	if mc.h.SingleVendorAcquire {
		v2 = v1
	}
	dims := []string{v1 + "#rpm", v1 + "#tpm", v2 + "#conc"}
	caps := capabilitiesOf(mc.s)
	m := newModel(baseMs)
	m.always = mc.h.AlwaysRecords
	m.prefix = prefix
	setup := newRunner(handles[0], baseMs, prefix)
	for _, b := range []BucketSpec{
		{Name: dims[0], LimitType: "requests", Capacity: 8, RefillAmount: 8, RefillPeriodMs: 1000},
		{Name: dims[1], LimitType: "tokens", Capacity: 1000, RefillAmount: 1000, RefillPeriodMs: 2000},
		{Name: dims[2], LimitType: "concurrent", Capacity: 2},
	} {
		st := Step{Op: "put_bucket", Bucket: &b}
		m.apply(st)
		if _, err := setup.exec(st); err != nil {
			panic(err)
		}
	}
	var clock atomic.Int64 // ms since baseMs, shared by the clients
	var mu sync.Mutex
	var hist []porcupine.Operation
	start := time.Now()
	type client struct {
		r         *runner
		rng       *rand.Rand
		mine, tpm []string
	}
	clients := make([]*client, len(handles))
	for c, s := range handles {
		clients[c] = &client{r: newRunner(s, baseMs, prefix), rng: rand.New(rand.NewPCG(seed, uint64(c)))}
	}
	record := func(c int, r *runner, st Step) {
		call := time.Since(start).Nanoseconds()
		got, err := r.exec(st)
		ret := time.Since(start).Nanoseconds()
		if err != nil {
			panic(err)
		}
		mu.Lock()
		hist = append(hist, porcupine.Operation{ClientId: c, Input: st, Call: call, Output: got, Return: ret})
		mu.Unlock()
	}
	const phases = 2
	for phase := range phases {
		var wg sync.WaitGroup
		for c, cl := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := phase * linearizeOps / phases; i < (phase+1)*linearizeOps/phases; i++ {
					st := clientStep(cl.rng, &clock, c, i, dims, &cl.mine, &cl.tpm)
					if !caps.stepSupported(st) {
						// An optional operation the store lacks: read instead.
						st.Op, st.Dimensions = "peek", []string{st.Dimension}
					}
					record(c, cl.r, st)
				}
			}()
		}
		wg.Wait()
		// The reconciler runs alone between phases: concurrent with other
		// operations, a batch reclaims its leases one at a time, and is
		// not one atomic step (see Store.Reconcile).
		now := clock.Add(1000)
		record(0, clients[0].r, Step{AtMs: now, Op: "reconcile"})
		for _, d := range dims {
			record(0, clients[0].r, Step{AtMs: now, Op: "peek", Dimensions: []string{d}})
		}
	}
	return hist, m, setup
}

// clientStep returns client c's i-th operation. Clients acquire under
// labels of their own, retry some of their acquisitions, and release,
// adjust and extend only their own leases; time advances by a shared
// clock that any client may read a little behind.
func clientStep(rng *rand.Rand, clock *atomic.Int64, c, i int, dims []string, mine, tpm *[]string) Step {
	now := clock.Add(int64(rng.IntN(150))) - int64(rng.IntN(50))
	st := Step{AtMs: max(now, 0)}
	own := func(ls []string) string {
		if len(ls) == 0 {
			return fmt.Sprintf("c%d-none", c)
		}
		return ls[rng.IntN(len(ls))]
	}
	switch r := rng.IntN(100); {
	case r < 45:
		st.Op, st.Lease, st.TTLMs = "acquire", fmt.Sprintf("c%d-%d", c, i), int64(200+rng.IntN(3000))
		st.Record = rng.IntN(3) == 0
		for _, d := range dims {
			if rng.IntN(2) == 0 || d == dims[2] {
				st.Items = append(st.Items, ItemSpec{d, int64(1+rng.IntN(300)) % capFor(d, dims)})
			}
		}
		*mine = append(*mine, st.Lease)
		if slices.ContainsFunc(st.Items, func(it ItemSpec) bool { return it.Dimension == dims[1] }) {
			*tpm = append(*tpm, st.Lease) // it holds the tokens dimension
		}
	case r < 65:
		st.Op, st.Lease = "release", own(*mine)
	case r < 80:
		st.Op, st.Lease, st.Dimension = "adjust", own(*tpm), dims[1]
		st.Delta = int64(rng.IntN(400) - 150)
		if st.Delta == 0 {
			st.Delta = 1
		}
	case r < 88:
		st.Op, st.Lease, st.TTLMs = "extend", own(*mine), int64(200+rng.IntN(3000))
	case r < 91:
		st.Op, st.Dimension, st.CooldownMs = "cooldown", dims[rng.IntN(2)], int64(50+rng.IntN(400))
	case r < 94:
		st.Op, st.Dimension = "sync", dims[rng.IntN(2)]
		st.Remaining = rng.Int64N(capFor(st.Dimension, dims) + 5)
	default:
		// Peek reads each bucket atomically, not several as one snapshot.
		st.Op, st.Dimensions = "peek", []string{dims[rng.IntN(len(dims))]}
	}
	return st
}

// capFor bounds a random cost so that it never exceeds the bucket's
// capacity (0 then means the bucket's cost per call).
func capFor(d string, dims []string) int64 {
	switch d {
	case dims[0]:
		return 3
	case dims[2]:
		return 2
	}
	return 1001
}

func describeHistory(hist []porcupine.Operation) string {
	out := ""
	for _, op := range hist {
		mark := ""
		if op.Metadata != nil {
			mark = fmt.Sprint(op.Metadata, ": ")
		}
		out += fmt.Sprintf("  %sclient %d [%d..%d µs] %s -> %s\n", mark, op.ClientId, op.Call/1000, op.Return/1000, jsonString(op.Input), jsonString(op.Output))
	}
	return out
}
