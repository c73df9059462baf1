package storetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ontopix/sluice/store"
)

// usageModelSteps is the length of one random usage sequence.
const usageModelSteps = 30

// usageKey is a usage row's identity: a put replaces the row of its key.
type usageKey struct {
	caller, writer string
	period         time.Duration
	start          time.Time
}

// testUsageModel runs random sequences of usage puts and lists against a
// reference model: a map from each row's identity to the row put under it
// with the latest Updated, to the millisecond (a put replaces, never adds;
// a resend of an earlier put that arrives after a later one leaves the
// later one's row; of equal Updated, the last put). After every step a
// random range of one period is listed and compared with the model.
// Each sequence has its own dimension; the sequence count is a tenth of
// the model-based test's (at least 3), as a usage step is cheap to check
// and the row space small.
func testUsageModel(t *testing.T, h Harness) {
	e := newUsageEnv(t, h)
	n := max(h.ModelSequences/10, 3)
	if h.ModelSequences == 0 {
		n = DefaultModelSequences / 30
	}
	for seed := uint64(1); seed <= uint64(n); seed++ {
		if !usageSequence(e, seed) {
			return
		}
	}
}

// usageSequence runs sequence seed and reports whether it passed.
func usageSequence(e *usageEnv, seed uint64) bool {
	rng := rand.New(rand.NewPCG(seed, seed^0x05a9e))
	dim := fmt.Sprintf("m%d#tpm", seed)
	callers := []string{"", "web", "batch"}
	writers := []string{"w1", "w2"}
	names := []string{"grants", "refusals", "waits"}
	model := map[usageKey]store.UsageRow{}
	var sent [][]store.UsageRow
	var log []string
	for step := range usageModelSteps {
		var rows []store.UsageRow
		if len(sent) > 0 && rng.IntN(4) == 0 {
			rows = sent[rng.IntN(len(sent))] // an earlier put, resent
			log = append(log, fmt.Sprintf("step %d: resend %d rows", step, len(rows)))
		} else {
			seen := map[usageKey]bool{}
			for range 1 + rng.IntN(4) {
				period, start := time.Minute, e.min(rng.IntN(6))
				if rng.IntN(3) == 0 {
					period, start = time.Hour, e.base.Add(time.Duration(rng.IntN(2))*time.Hour)
				}
				r := store.UsageRow{Dimension: dim, Caller: callers[rng.IntN(len(callers))], Period: period, Start: start,
					Writer: writers[rng.IntN(len(writers))], Counters: map[string]int64{},
					Updated: e.base.Add(time.Duration(step)*time.Second + time.Duration(rng.IntN(1000))*time.Millisecond)}
				for _, c := range names {
					if rng.IntN(2) == 0 {
						r.Counters[c] = 1 + rng.Int64N(1_000_000)
					}
				}
				k := usageKey{r.Caller, r.Writer, r.Period, r.Start}
				if seen[k] {
					continue // one put names a row once
				}
				seen[k] = true
				rows = append(rows, r)
			}
			sent = append(sent, rows)
			log = append(log, fmt.Sprintf("step %d: put %v", step, usageText(rows)))
		}
		e.put(rows, store.UsageRetention{})
		for _, r := range rows {
			k := usageKey{r.Caller, r.Writer, r.Period, r.Start}
			if old, ok := model[k]; !ok || r.Updated.UnixMilli() >= old.Updated.UnixMilli() {
				model[k] = r
			}
		}
		q := store.UsageQuery{Dimension: dim, Period: time.Minute, From: e.min(rng.IntN(6))}
		q.To = q.From.Add(time.Duration(rng.IntN(7)) * time.Minute)
		if rng.IntN(3) == 0 {
			q.Period, q.From = time.Hour, e.base.Add(time.Duration(rng.IntN(2))*time.Hour)
			q.To = q.From.Add(time.Duration(rng.IntN(3)) * time.Hour)
		}
		var want []store.UsageRow
		for k, r := range model {
			if k.period == q.Period && !k.start.Before(q.From) && k.start.Before(q.To) {
				want = append(want, r)
			}
		}
		got := e.list(q)
		if g, w := usageText(got), usageText(want); !slices.Equal(g, w) {
			e.t.Errorf("seed %d step %d: list %s [%s, %s): got %v, want %v\nsteps:\n%v", seed, step, q.Period,
				q.From.Format("15:04"), q.To.Format("15:04"), g, w, log)
			return false
		}
	}
	return true
}
