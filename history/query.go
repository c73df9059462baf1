package history

import (
	"context"
	"fmt"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// MaxPoints is the most points one Query returns.
const MaxPoints = 100_000

// Query selects totals of one dimension over time.
type Query struct {
	// Dimension is the dimension's name. Required.
	Dimension string
	// Caller selects one caller's totals; "" sums every caller's.
	Caller string
	// From and To bound the time: points start from From, rounded down
	// to Step, and before To. To must be after From.
	From, To time.Time
	// Step is the points' length: time.Second for this process's live
	// view (the last 15 minutes by default, WithLiveWindow), time.Minute
	// or time.Hour for the store's totals, summed over every process of
	// the fleet that writes to it.
	Step time.Duration
}

// Point is the totals of one step.
type Point struct {
	// Start is the step's first instant, in UTC.
	Start time.Time
	// Counts are the totals from Start to Start plus the step.
	Counts Counts
}

// Query returns one point per step from q.From (rounded down to the step)
// to q.To, steps without activity included (zero counts, MinRemaining -1).
// A step of a second reads this process's live view; older seconds than
// the live window count nothing. A step of a minute or an hour reads the
// store's rows of every writer (and every caller when q.Caller is ""),
// with this Recorder's totals not yet written in place of its own rows,
// so that nothing is counted twice. When the store keeps no usage history,
// minutes and hours are summed from the live view. Bad input is an error
// matching store.ErrInvalid.
func (r *Recorder) Query(ctx context.Context, q Query) ([]Point, error) {
	if err := checkQuery(q); err != nil {
		return nil, fmt.Errorf("history: query: %w", err)
	}
	if q.To.Sub(q.From) > time.Duration(MaxPoints)*q.Step { // Sub saturates: no overflow
		return nil, fmt.Errorf("history: query: %w", &bucket.FieldError{Field: "to", Value: q.To.UTC().Format(time.RFC3339),
			Reason: fmt.Sprintf("the range holds more than %d steps of %s", MaxPoints, q.Step)})
	}
	step := int64(q.Step / time.Second)
	from, to := floor(q.From.Unix(), step), ceil(q.To)
	n := (to - from + step - 1) / step
	if n > MaxPoints {
		return nil, fmt.Errorf("history: query: %w", &bucket.FieldError{Field: "to", Value: q.To.UTC().Format(time.RFC3339),
			Reason: fmt.Sprintf("the range holds %d steps of %s; at most %d", n, q.Step, MaxPoints)})
	}
	ts := make([]tally, n)
	for i := range ts {
		ts[i] = newTally()
	}
	add := func(caller string, start int64, t *tally) {
		if (q.Caller == "" || caller == q.Caller) && start >= from && start < to {
			ts[(start-from)/step].add(t)
		}
	}
	if err := r.gather(ctx, q.Dimension, step, from, to, add); err != nil {
		return nil, err
	}
	out := make([]Point, n)
	for i := range out {
		out[i] = Point{Start: time.Unix(from+int64(i)*step, 0).UTC(), Counts: ts[i].counts()}
	}
	return out, nil
}

// Callers returns the totals of dimension from from to to, by caller: from
// the store's minute rows when from is within their retention (48 h by
// default), else its hour rows (from rounded down to the hour); from the
// live view when the store keeps no usage history. Every process's rows
// are summed, as in Query.
func (r *Recorder) Callers(ctx context.Context, dimension string, from, to time.Time) (map[string]Counts, error) {
	step := time.Second
	if r.usage() != nil {
		step = time.Minute
		if from.Before(r.now().Add(-r.ret.Minute)) {
			step = time.Hour
		}
	}
	if err := checkQuery(Query{Dimension: dimension, From: from, To: to, Step: step}); err != nil {
		return nil, fmt.Errorf("history: callers: %w", err)
	}
	s := int64(step / time.Second)
	lo, hi := floor(from.Unix(), s), ceil(to)
	ts := make(map[string]*tally)
	add := func(caller string, start int64, t *tally) {
		if start < lo || start >= hi {
			return
		}
		c := ts[caller]
		if c == nil {
			n := newTally()
			c = &n
			ts[caller] = c
		}
		c.add(t)
	}
	if err := r.gather(ctx, dimension, s, lo, hi, add); err != nil {
		return nil, err
	}
	out := make(map[string]Counts, len(ts))
	for c, t := range ts {
		out[c] = t.counts()
	}
	return out, nil
}

// Live returns this process's totals of dimension over the last 60
// seconds, every caller's summed, from the live view.
func (r *Recorder) Live(dimension string) Counts {
	now := r.now().Unix()
	t := newTally()
	r.ring(dimension, now-59, now+1, func(_ string, _ int64, u *tally) { t.add(u) })
	return t.counts()
}

// gather calls add with every total of dim in [from, to) (Unix seconds) at
// step seconds: the live view's for a step of a second or when the store
// keeps no history, else the store's rows merged with this writer's.
func (r *Recorder) gather(ctx context.Context, dim string, step, from, to int64, add func(caller string, start int64, t *tally)) error {
	if step == 1 || r.usage() == nil {
		r.ring(dim, from, to, func(caller string, sec int64, t *tally) { add(caller, floor(sec, step), t) })
		return nil
	}
	mem := r.mine(dim, step, from, to)
	rows, err := r.st.ListUsage(ctx, store.UsageQuery{Dimension: dim, Period: time.Duration(step) * time.Second,
		From: time.Unix(from, 0), To: time.Unix(to, 0)})
	if r.unsupported(err) { // the store keeps no history after all
		r.ring(dim, from, to, func(caller string, sec int64, t *tally) { add(caller, floor(sec, step), t) })
		return nil
	}
	if err != nil {
		return fmt.Errorf("history: read usage of %q: %w", dim, err)
	}
	for _, row := range rows {
		start := row.Start.Unix()
		if row.Writer == r.writer {
			if _, ok := mem[rowKey{key{dim, row.Caller}, step, start}]; ok {
				continue // the totals in memory are newer
			}
		}
		t := tallyOf(row.Counters)
		add(row.Caller, start, &t)
	}
	for k, t := range mem {
		add(k.caller, k.start, &t)
	}
	return nil
}

// mine returns a copy of this writer's rows of dim and period in memory
// whose start is in [from, to). It is taken before the store is read: a
// row forgotten after a flush is then in the store.
func (r *Recorder) mine(dim string, period, from, to int64) map[rowKey]tally {
	out := make(map[rowKey]tally)
	in := func(k rowKey) bool { return k.dim == dim && k.period == period && k.start >= from && k.start < to }
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.byDim[dim] {
		if a := s.row(period); a.start != 0 {
			if k := (rowKey{s.key, period, a.start}); in(k) {
				out[k] = a.t
			}
		}
	}
	for k, a := range r.pending {
		if in(k) {
			out[k] = a.t
		}
	}
	return out
}

// ring calls f with every live second of dim in [from, to), within the
// live window.
func (r *Recorder) ring(dim string, from, to int64, f func(caller string, sec int64, t *tally)) {
	now := r.now().Unix()
	from = max(from, now-r.window+1)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.byDim[dim] {
		if to-from < r.slots {
			// A short range (Live's minute): its own slots only.
			for sec := from; sec < to; sec++ {
				i := sec & (r.slots - 1)
				if t := s.ring[i]; t != nil && s.secs[i] == sec {
					f(s.caller, sec, t)
				}
			}
			continue
		}
		for i, t := range s.ring {
			if sec := s.secs[i]; t != nil && sec >= from && sec < to {
				f(s.caller, sec, t)
			}
		}
	}
}

// checkQuery checks a query's fields.
func checkQuery(q Query) error {
	switch {
	case q.Dimension == "":
		return &bucket.FieldError{Field: "dimension", Value: q.Dimension, Reason: "must not be empty"}
	case q.Step != time.Second && q.Step != time.Minute && q.Step != time.Hour:
		return &bucket.FieldError{Field: "step", Value: q.Step, Reason: "must be 1s, 1m0s or 1h0m0s"}
	case q.From.IsZero():
		return &bucket.FieldError{Field: "from", Value: q.From, Reason: "must be set"}
	case q.From.Before(time.Unix(0, 0)):
		return &bucket.FieldError{Field: "from", Value: q.From.UTC().Format(time.RFC3339Nano), Reason: "must not be before 1970"}
	case !q.To.After(q.From):
		return &bucket.FieldError{Field: "to", Value: q.To.UTC().Format(time.RFC3339Nano), Reason: "must be after from (" + q.From.UTC().Format(time.RFC3339Nano) + ")"}
	}
	return nil
}

// floor rounds sec down to a multiple of step.
func floor(sec, step int64) int64 { return sec - mod(sec, step) }

// ceil returns t in Unix seconds, rounded up.
func ceil(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}
