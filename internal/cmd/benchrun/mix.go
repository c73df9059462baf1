package benchrun

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ontopix/sluice/internal/cmd/jsonout"
	"github.com/ontopix/sluice/store"
	"time"
)

// MaxClasses bounds the classes of a mix.
const MaxClasses = 16

// ParseMix parses a --mix spec, "COSTxWORKERS[,COSTxWORKERS]..." (e.g.
// "200x20,5000x2"), into classes asking for cost tokens of dimension.
func ParseMix(spec, dimension string) ([]Class, error) {
	parts := strings.Split(spec, ",")
	if len(parts) > MaxClasses {
		return nil, fmt.Errorf("--mix %q: %d classes, at most %d", spec, len(parts), MaxClasses)
	}
	classes := make([]Class, 0, len(parts))
	for _, p := range parts {
		c, w, ok := strings.Cut(strings.TrimSpace(p), "x")
		cost, err1 := strconv.ParseInt(c, 10, 64)
		workers, err2 := strconv.Atoi(w)
		switch {
		case !ok || err1 != nil || err2 != nil:
			return nil, fmt.Errorf("--mix %q: class %q: want COSTxWORKERS, e.g. 200x20", spec, p)
		case cost < 1 || cost > 1_000_000_000_000:
			return nil, fmt.Errorf("--mix %q: class %q: cost %d must be between 1 and 10^12 tokens", spec, p, cost)
		case workers < 1 || workers > 10_000:
			return nil, fmt.Errorf("--mix %q: class %q: %d workers, must be between 1 and 10000", spec, p, workers)
		}
		classes = append(classes, Class{Name: strings.TrimSpace(p), Items: []store.Item{{Dimension: dimension, Cost: cost}}, Workers: workers})
	}
	return classes, nil
}

// ClassReport is one class of a run.
type ClassReport struct {
	Name     string `json:"name"`
	Cost     int64  `json:"cost"`
	Workers  int    `json:"workers"`
	Granted  int64  `json:"granted"`
	Timeouts int64  `json:"timeouts"`
	// Cut counts waits the run's end cut short (see ClassPart.Cut).
	Cut int64 `json:"cut_at_end"`
	// TokenShare is the class's share of the tokens granted on the first
	// dimension, 0 to 1.
	TokenShare float64 `json:"token_share"`
	// WaitP50, WaitP99 and WaitMax are over granted waits.
	WaitP50 jsonout.Duration `json:"wait_p50"`
	WaitP99 jsonout.Duration `json:"wait_p99"`
	WaitMax jsonout.Duration `json:"wait_max"`
	// LagP99 and LagMax are how long after its valid instant a worker got
	// its slot (see ClassPart.LagUS).
	LagP50 jsonout.Duration `json:"lag_p50"`
	LagP99 jsonout.Duration `json:"lag_p99"`
	LagMax jsonout.Duration `json:"lag_max"`
	// CallsPerGrant is the class's store calls per grant.
	CallsPerGrant float64 `json:"store_calls_per_grant"`
	// PerWorker counts each worker's grants.
	PerWorker []int64 `json:"per_worker"`
	// FCFS is how many grants each worker of the class would get from a
	// strict first-come-first-served queue over the run (see FCFS); 0
	// when not computed.
	FCFS float64 `json:"fcfs_per_worker,omitempty"`
	// FCFSRatio is the least, over the class's workers, of its grants ÷
	// FCFS.
	FCFSRatio float64 `json:"fcfs_ratio,omitempty"`
}

// classReports summarises the classes of cfg from the merged parts.
func classReports(parts []*Part, cfg Config) []ClassReport {
	classes := cfg.classes()
	out := make([]ClassReport, len(classes))
	var total int64
	for k, cl := range classes {
		r := &out[k]
		r.Name, r.Cost, r.Workers = cl.Name, cl.Items[0].Cost, cl.Workers
		var wait, lag []int64
		var calls, milli int64
		for _, p := range parts {
			if k >= len(p.Classes) {
				continue
			}
			cp := p.Classes[k]
			r.Granted += cp.Granted
			r.Timeouts += cp.Timeouts
			r.Cut += cp.Cut
			calls += cp.Calls
			milli += cp.Milli
			wait = append(wait, cp.WaitUS...)
			lag = append(lag, cp.LagUS...)
			r.PerWorker = append(r.PerWorker, cp.PerWorker...)
		}
		r.TokenShare = float64(milli)
		total += milli
		r.WaitP50, r.WaitP99, r.WaitMax = percentiles(wait)
		r.LagP50, r.LagP99, r.LagMax = percentiles(lag)
		if r.Granted > 0 {
			r.CallsPerGrant = float64(calls) / float64(r.Granted)
		}
	}
	for k := range out {
		if total > 0 {
			out[k].TokenShare /= float64(total)
		} else {
			out[k].TokenShare = 0
		}
	}
	return out
}

// CompareFCFS sets each class's FCFS reference (a worker's grants from
// FCFS, per class) and the least ratio of a worker's grants to it.
func (r *Report) CompareFCFS(ref []float64) {
	for k := range r.Classes {
		c := &r.Classes[k]
		if k >= len(ref) || ref[k] <= 0 {
			continue
		}
		c.FCFS = ref[k]
		c.FCFSRatio = math.Inf(1)
		for _, n := range c.PerWorker {
			c.FCFSRatio = min(c.FCFSRatio, float64(n)/ref[k])
		}
	}
}

// percentiles returns the p50, p99 and maximum of µs values.
func percentiles(us []int64) (p50, p99, mx jsonout.Duration) {
	n := len(us)
	if n == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(us)
	slices.Sort(s)
	d := func(i int) jsonout.Duration { return jsonout.Duration(time.Duration(s[i]) * time.Microsecond) }
	return d((n - 1) / 2), d((n - 1) * 99 / 100), d(n - 1)
}

// FCFS returns, per class, how many grants a worker would get on average in d
// from a strict first-come-first-served queue on one bucket of capacity
// and refill per second (both in tokens), holding tokens at the start:
// every worker asks again the moment it is served, requests are served in
// the order they arrive (at first, in class order), and each is served as soon
// as the bucket, debited by everything served before it, holds its cost.
// Round trips take no time.
func FCFS(classes []Class, capacity, refill, tokens float64, d time.Duration) []float64 {
	type w struct {
		class int
		cost  float64
		at    float64 // next arrival, seconds
		seq   int     // arrival order, for arrivals at the same time
		n     int64
	}
	var ws []*w
	for k, cl := range classes {
		for range cl.Workers {
			ws = append(ws, &w{class: k, cost: float64(cl.Items[0].Cost), seq: len(ws)})
		}
	}
	seq := len(ws)
	if len(ws) == 0 || refill <= 0 {
		return make([]float64, len(classes))
	}
	end := d.Seconds()
	bal, t := tokens, 0.0 // balance at time t, the last service
	for {
		// The earliest arrival; at the same time, the first to arrive.
		next := ws[0]
		for _, x := range ws[1:] {
			if x.at < next.at || (x.at == next.at && x.seq < next.seq) {
				next = x
			}
		}
		if next.cost > capacity {
			next.at = math.Inf(1)
			continue
		}
		start := max(next.at, t)
		b := min(capacity, bal+refill*(start-t))
		if b < next.cost {
			start += (next.cost - b) / refill
			b = next.cost
		}
		if start >= end-1e-9 || math.IsInf(start, 1) {
			break
		}
		next.n++
		bal, t = b-next.cost, start
		next.at, next.seq = start, seq
		seq++
	}
	out := make([]float64, len(classes))
	for _, x := range ws {
		out[x.class] += float64(x.n) / float64(classes[x.class].Workers)
	}
	return out
}
