// Package verify checks a log of grants against the limits they were granted
// under, from the recorded events alone: it proves, or refutes, that a store
// never admitted more than its buckets allow.
//
// For a requests or tokens bucket the bound is the token-bucket one: the
// balance never exceeds the capacity and refills at most Amount per Period, and
// a grant needs the cost to be available, so the balance is never negative
// right after a grant. Hence, for any run of consecutive events that ends with
// a grant, the net tokens debited by those events (reserved costs at grant
// time, plus settlement charges, minus refunds, at settlement time) are at
// most
//
//	capacity + Amount × (t_last − t_first) / Period
//
// plus less than one millitoken of refill the bucket had earned but not yet
// credited. A settlement may drive the balance into debt (the caller used
// more than it reserved); that is the caller's overrun, not an admission, and
// it is repaid before the next grant, which the bound above then covers. The
// check uses every pair of events, in linear time, and reports the worst
// excess. For a concurrent bucket, the slots held (grants minus releases, in
// order) must never exceed the capacity.
//
// Times are compared at millisecond resolution, as the bucket math works.
// Events must be given in the order the store applied them (a stable sort by
// time is applied, so events with equal timestamps keep their given order);
// when they come from several clocks, Input.Slack widens every window by the
// worst clock disagreement.
package verify

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"slices"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/cmd/jsonout"
	"github.com/ontopix/sluice/store"
)

// Kind is what an Event did to its bucket.
type Kind uint8

const (
	// Grant debited Milli millitokens (a reserved cost, or slots taken).
	Grant Kind = iota + 1
	// Settle changed a granted cost after the fact: a positive Milli charged
	// more, a negative one refunded. Record the change the store applied.
	Settle
	// Release gave Milli millitokens back to a concurrent bucket.
	Release
)

// String returns "grant", "settle" or "release".
func (k Kind) String() string {
	switch k {
	case Grant:
		return "grant"
	case Settle:
		return "settle"
	case Release:
		return "release"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Event is one recorded change to a bucket.
type Event struct {
	// Time is when the store applied it (the store's decision time).
	Time time.Time
	// Dimension names the bucket.
	Dimension string
	// Kind says what happened.
	Kind Kind
	// Milli is the amount in millitokens (1 token = 1000).
	Milli int64
}

// Input is what Check verifies.
type Input struct {
	// Buckets are the limits the events were granted under.
	Buckets []store.Bucket
	// Events is the log, in the order the store applied it.
	Events []Event
	// Start and End bound the run, for utilisation. Zero values mean the
	// first and last event.
	Start, End time.Time
	// Slack widens every window by this much, for logs merged from clocks
	// that disagree by up to Slack. Zero for a log with one clock.
	Slack time.Duration
}

// Report is the verdict on every bucket, in the order of Input.Buckets.
type Report struct {
	// Start and End bound the run.
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Dimensions has one entry per bucket.
	Dimensions []Dimension `json:"dimensions"`
}

// OK reports that no bucket's limit was exceeded and no event was
// inconsistent.
func (r *Report) OK() bool {
	for _, d := range r.Dimensions {
		if !d.OK() {
			return false
		}
	}
	return true
}

// Dimension is the verdict on one bucket. Amounts are in millitokens.
type Dimension struct {
	// Name is the dimension.
	Name string `json:"name"`
	// Config is the bucket's configuration.
	Config bucket.Config `json:"config"`
	// Grants counts grant events.
	Grants int `json:"grants"`
	// Consumed is the net amount debited: grants plus settlement charges
	// minus refunds (for concurrent buckets, the slots ever taken).
	Consumed int64 `json:"consumed_milli"`
	// Charged and Refunded sum the positive and negative settlements.
	Charged  int64 `json:"charged_milli"`
	Refunded int64 `json:"refunded_milli"`
	// Allowed is what the limit allowed over the run, for a bucket full at
	// Start: capacity + refill over End−Start (time-based buckets only).
	Allowed int64 `json:"allowed_milli,omitempty"`
	// Utilisation is Consumed/Allowed for time-based buckets, and the mean
	// share of slots held over the run for concurrent ones.
	Utilisation float64 `json:"utilisation"`
	// PeakInFlight is the most slots held at once (concurrent only).
	PeakInFlight int64 `json:"peak_in_flight_milli,omitempty"`
	// MaxWindow is the largest net amount debited in any window of one
	// refill period (time-based only), settlements included.
	MaxWindow int64 `json:"max_window_milli,omitempty"`
	// WorstExcess is how far the worst window ending at a grant went above
	// the bound (negative: the margin left). For concurrent buckets it is
	// PeakInFlight − capacity.
	WorstExcess int64 `json:"worst_excess_milli"`
	// WorstFrom and WorstTo bound that window.
	WorstFrom time.Time `json:"worst_from"`
	WorstTo   time.Time `json:"worst_to"`
	// Exceeded reports that the limit was exceeded.
	Exceeded bool `json:"exceeded"`
	// Problems lists inconsistencies in the log (a release with nothing
	// held, a settlement on a concurrent bucket, an event on an unknown
	// dimension is reported by Check as an error instead).
	Problems []string `json:"problems,omitempty"`
}

// OK reports that the limit held and the log was consistent.
func (d *Dimension) OK() bool { return !d.Exceeded && len(d.Problems) == 0 }

// Check verifies in's events against in's buckets. It returns an error for
// an invalid bucket, an event on a dimension with no bucket, or amounts too
// large to check exactly.
func Check(in Input) (*Report, error) {
	idx := make(map[string]int, len(in.Buckets))
	for i, b := range in.Buckets {
		if err := b.Config.Validate(); err != nil {
			return nil, fmt.Errorf("verify: bucket %q: %w", b.Name, err)
		}
		if _, dup := idx[b.Name]; dup {
			return nil, fmt.Errorf("verify: bucket %q given twice", b.Name)
		}
		idx[b.Name] = i
	}
	per := make([][]Event, len(in.Buckets))
	for _, e := range in.Events {
		i, ok := idx[e.Dimension]
		if !ok {
			return nil, fmt.Errorf("verify: %s event on %q, which has no bucket", e.Kind, e.Dimension)
		}
		per[i] = append(per[i], e)
	}
	r := &Report{Start: in.Start, End: in.End}
	if len(in.Events) > 0 {
		first, last := in.Events[0].Time, in.Events[0].Time
		for _, e := range in.Events {
			first, last = minTime(first, e.Time), maxTime(last, e.Time)
		}
		if r.Start.IsZero() || first.Before(r.Start) {
			r.Start = first
		}
		if r.End.IsZero() || last.After(r.End) {
			r.End = last
		}
	}
	if r.End.Before(r.Start) {
		return nil, fmt.Errorf("verify: end %s is before start %s", r.End, r.Start)
	}
	for i, b := range in.Buckets {
		evs := per[i]
		slices.SortStableFunc(evs, func(a, b Event) int { return a.Time.Compare(b.Time) })
		d := Dimension{Name: b.Name, Config: b.Config}
		var err error
		if b.Type == bucket.Concurrent {
			checkConcurrent(&d, evs, r.Start, r.End)
		} else {
			err = checkTimed(&d, evs, r.Start, r.End, in.Slack)
		}
		if err != nil {
			return nil, fmt.Errorf("verify: %s: %w", b.Name, err)
		}
		r.Dimensions = append(r.Dimensions, d)
	}
	return r, nil
}

// limit is the bound 2^60 that every scaled intermediate stays below, so
// that the sums of a few of them below cannot overflow an int64.
const limit = 1 << 60

// mul returns a*b for non-negative a and b, or ok false if it reaches limit.
func mul(a, b int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo >= limit {
		return 0, false
	}
	return int64(lo), true
}

// checkTimed runs the token-bucket bound over every run of events ending
// with a grant. With P(k) the net debit of events 0..k and t in ms since the
// first event, the excess of run i..j, scaled by the period, is
//
//	(P(j) − P(i−1))·period − capacity·period − amount·(t(j) − t(i) + slack)
//
// and its maximum over i ≤ j is P(j)·period − amount·t(j) + max over i ≤ j of
// (amount·t(i) − P(i−1)·period), minus the constant terms: one pass.
func checkTimed(d *Dimension, evs []Event, start, end time.Time, slack time.Duration) error {
	l := d.Config.Limits()
	period, amount, capacity := l.Period, l.Amount, l.Capacity
	var abs int64 = capacity
	for _, e := range evs {
		switch e.Kind {
		case Grant:
			if e.Milli < 0 {
				d.Problems = append(d.Problems, fmt.Sprintf("grant of %d millitokens at %s", e.Milli, e.Time.Format(time.RFC3339Nano)))
			}
		case Settle:
		default:
			d.Problems = append(d.Problems, fmt.Sprintf("%s event at %s on a %s bucket", e.Kind, e.Time.Format(time.RFC3339Nano), d.Config.Type))
			continue
		}
		abs += max(e.Milli, -e.Milli)
	}
	spanMs := end.UnixMilli() - start.UnixMilli() + slack.Milliseconds()
	if len(evs) > 0 {
		spanMs = max(spanMs, evs[len(evs)-1].Time.UnixMilli()-evs[0].Time.UnixMilli()+slack.Milliseconds())
	}
	if _, ok := mul(abs, period); !ok {
		return fmt.Errorf("amounts too large to check exactly")
	}
	if _, ok := mul(amount, spanMs); !ok {
		return fmt.Errorf("run too long to check exactly")
	}
	capScaled, _ := mul(capacity, period)
	slackScaled, _ := mul(amount, slack.Milliseconds())

	if n, ok := mul(amount, end.UnixMilli()-start.UnixMilli()); ok {
		d.Allowed = capacity + n/period
	}
	var (
		p         int64 // net debit so far
		best      int64 // max over i of amount·t(i) − P(i−1)·period
		haveBest  bool
		bestFrom  time.Time
		worst     int64 // scaled excess of the worst run ending at a grant
		haveWorst bool
		t0        int64
		win       int // two-pointer start for MaxWindow
		winP      int64
	)
	if len(evs) > 0 {
		t0 = evs[0].Time.UnixMilli()
	}
	prefix := make([]int64, 0, len(evs))
	for _, e := range evs {
		if e.Kind != Grant && e.Kind != Settle {
			prefix = append(prefix, p)
			continue
		}
		t := e.Time.UnixMilli() - t0
		cand := amount*t - p*period
		if !haveBest || cand > best {
			best, bestFrom, haveBest = cand, e.Time, true
		}
		p += e.Milli
		prefix = append(prefix, p)
		d.Consumed = p
		if e.Kind == Grant {
			d.Grants++
			x := p*period - amount*t + best - capScaled - slackScaled
			if !haveWorst || x > worst {
				worst, haveWorst = x, true
				d.WorstFrom, d.WorstTo = bestFrom, e.Time
			}
		} else if e.Milli > 0 {
			d.Charged += e.Milli
		} else {
			d.Refunded -= e.Milli
		}
		// The largest net debit in a window [t(j)−period+1ms, t(j)].
		for evs[win].Time.UnixMilli() <= e.Time.UnixMilli()-period {
			winP = prefix[win]
			win++
		}
		d.MaxWindow = max(d.MaxWindow, p-winP)
	}
	if haveWorst {
		// Less than one millitoken of earned refill may be uncredited at the
		// window's start, so only a scaled excess of a whole period (one
		// millitoken) or more is over the bound.
		d.WorstExcess = floorDiv(worst, period)
		d.Exceeded = worst >= period
	} else {
		d.WorstExcess = -capacity
	}
	if d.Allowed > 0 {
		d.Utilisation = float64(d.Consumed) / float64(d.Allowed)
	}
	return nil
}

// checkConcurrent sweeps grants and releases in order: the slots held must
// never exceed the capacity.
func checkConcurrent(d *Dimension, evs []Event, start, end time.Time) {
	capacity := d.Config.Limits().Capacity
	var held, area int64 // area: millitoken·ms held
	last := start.UnixMilli()
	for _, e := range evs {
		t := e.Time.UnixMilli()
		if t > last {
			area += held * (t - last) / bucket.Milli
			last = t
		}
		switch e.Kind {
		case Grant:
			d.Grants++
			d.Consumed += e.Milli
			held += e.Milli
			if held > d.PeakInFlight {
				d.PeakInFlight = held
				d.WorstTo = e.Time
			}
		case Release:
			held -= e.Milli
			if held < 0 {
				d.Problems = append(d.Problems, fmt.Sprintf("release at %s with nothing held", e.Time.Format(time.RFC3339Nano)))
				held = 0
			}
		default:
			d.Problems = append(d.Problems, fmt.Sprintf("%s event at %s on a concurrent bucket", e.Kind, e.Time.Format(time.RFC3339Nano)))
		}
	}
	if t := end.UnixMilli(); t > last {
		area += held * (t - last) / bucket.Milli
	}
	d.WorstFrom = d.WorstTo
	d.WorstExcess = d.PeakInFlight - capacity
	d.Exceeded = d.PeakInFlight > capacity
	if span := end.UnixMilli() - start.UnixMilli(); span > 0 && capacity > 0 {
		d.Utilisation = float64(area) * bucket.Milli / float64(capacity*span)
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// dimensionJSON is a Dimension with its Config in the JSON form the
// command line prints (snake_case, the type as a word, the period as a
// duration string).
type dimensionJSON struct {
	*dimensionFields
	Config jsonout.Config `json:"config"`
}

// dimensionFields is Dimension without its methods, so that the JSON
// encoder does not recurse.
type dimensionFields Dimension

// MarshalJSON implements json.Marshaler.
func (d Dimension) MarshalJSON() ([]byte, error) {
	return json.Marshal(dimensionJSON{dimensionFields: (*dimensionFields)(&d), Config: jsonout.ConfigOf(d.Config)})
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Dimension) UnmarshalJSON(b []byte) error {
	v := dimensionJSON{dimensionFields: (*dimensionFields)(d)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	c, err := v.Config.Bucket()
	if err != nil {
		return fmt.Errorf("dimension %q: config: %w", d.Name, err)
	}
	d.Config = c
	return nil
}
