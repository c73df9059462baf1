package console

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"time"

	"github.com/ontopix/sluice/history"
)

// ranges are the history's ranges, with their steps: minutes for an hour
// and a day, hours for a week.
var ranges = []struct {
	Name string
	Span time.Duration
	Step time.Duration
}{
	{"1h", time.Hour, time.Minute},
	{"24h", 24 * time.Hour, time.Minute},
	{"7d", 7 * 24 * time.Hour, time.Hour},
}

// historyData is a dimension's history section for one range.
type historyData struct {
	Dimension, Path, Range string
	Ranges                 []string
	Hist                   bool
	Step                   string
	// Calls, Tokens and Waits are the charts' series as JSON for
	// console.js: {"t": [unix seconds], "s": [{"label", "data"}]}.
	Calls, Tokens, Waits string
	Callers              []callerRow
	Err                  string
}

// series is one chart's data.
type series struct {
	T []int64       `json:"t"`
	S []seriesLabel `json:"s"`
}

type seriesLabel struct {
	Label string    `json:"label"`
	Data  []float64 `json:"data"`
}

// history reads a dimension's history over the range named rng ("1h" if
// unknown): the points at the range's step, every step present (zero
// when nothing happened), and the usage per caller.
func (h *handler) history(ctx context.Context, dim, rng string) historyData {
	d := historyData{Dimension: dim, Path: "d/" + url.PathEscape(dim), Range: "1h", Hist: h.hist != nil}
	r := ranges[0]
	for _, x := range ranges {
		d.Ranges = append(d.Ranges, x.Name)
		if x.Name == rng {
			r, d.Range = x, x.Name
		}
	}
	d.Step = map[time.Duration]string{time.Minute: "minute", time.Hour: "hour"}[r.Step]
	if h.hist == nil {
		return d
	}
	to := h.now().Truncate(r.Step).Add(r.Step)
	from := to.Add(-r.Span)
	pts, err := h.hist.Query(ctx, history.Query{Dimension: dim, From: from, To: to, Step: r.Step})
	if err != nil {
		d.Err = redact(err.Error())
		return d
	}
	callers, err := h.hist.Callers(ctx, dim, from, to)
	if err != nil {
		d.Err = redact(err.Error())
		return d
	}
	d.Callers = callerRows(callers)
	n := int(r.Span / r.Step)
	at := make(map[int64]history.Counts, len(pts))
	for _, p := range pts {
		at[p.Start.Unix()] = p.Counts
	}
	calls := series{T: make([]int64, n), S: labels("grants", "refusals", "429s", "degraded", "errors")}
	tokens := series{T: calls.T, S: labels("reserved", "settled", "debt")}
	waits := series{T: calls.T, S: labels("p95 ms", "mean ms")}
	for i := range n {
		t := from.Add(time.Duration(i) * r.Step).Unix()
		calls.T[i] = t
		c := at[t]
		r429 := c.Responses["429_requests"] + c.Responses["429_tokens"] + c.Responses["429_other"]
		put(calls.S, c.Grants, c.Refusals, r429, c.Degraded, c.Errors)
		put(tokens.S, c.Reserved, c.Settled, c.Debt)
		var mean int64
		if c.Waits > 0 {
			mean = (c.WaitSum / time.Duration(c.Waits)).Milliseconds()
		}
		put(waits.S, p95ms(c.WaitHist), mean)
	}
	d.Calls, d.Tokens, d.Waits = jsonOf(calls), jsonOf(tokens), jsonOf(waits)
	return d
}

func labels(names ...string) []seriesLabel {
	out := make([]seriesLabel, len(names))
	for i, n := range names {
		out[i].Label = n
	}
	return out
}

func put(s []seriesLabel, vs ...int64) {
	for j, v := range vs {
		s[j].Data = append(s[j].Data, float64(v))
	}
}

// p95ms is p95 in milliseconds, the upper bound of its histogram bucket
// (the last bound for the overflow bucket); 0 for an empty histogram.
func p95ms(hist []int64) int64 {
	var n int64
	for _, c := range hist {
		n += c
	}
	if n == 0 {
		return 0
	}
	want := (n*95 + 99) / 100
	var cum int64
	for i, c := range hist {
		cum += c
		if cum >= want && i < len(waitBounds) {
			return waitBounds[i].Milliseconds()
		}
	}
	return waitBounds[len(waitBounds)-1].Milliseconds()
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
