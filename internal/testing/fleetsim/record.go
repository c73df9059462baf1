package fleetsim

import (
	"sync"
	"time"

	"github.com/ontopix/sluice/internal/testing/fleetcheck"
)

// Clock is a client's clock: the reference time shifted by Offset, running
// Drift faster (0.01 is 1 % fast), and jumping by Jump once JumpAfter has
// passed since the run began.
type Clock struct {
	Offset    time.Duration
	Drift     float64
	JumpAfter time.Duration
	Jump      time.Duration
	start     time.Time
}

// Now returns the client's time.
func (c *Clock) Now() time.Time {
	now := time.Now()
	el := now.Sub(c.start)
	t := now.Add(c.Offset + time.Duration(float64(el)*c.Drift))
	if c.Jump != 0 && el >= c.JumpAfter {
		t = t.Add(c.Jump)
	}
	return t
}

// Recorder collects a run's history in reference milliseconds since its
// start, and, for the use of concurrent dimensions, the holds and waits in
// microseconds. It is safe for concurrent use.
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	dims  map[string]*fleetcheck.Dimension
	// holds and waits are each dimension's holds (grants and releases)
	// and callers' waits in reference microseconds: the history widens
	// every event outward to the millisecond, so that no rounding hides
	// an excess, which would shorten each hold by about a millisecond in
	// the use.
	holds map[string][]fleetcheck.Event
	waits map[string][]fleetcheck.Span
}

// NewRecorder starts a history now.
func NewRecorder() *Recorder {
	return &Recorder{start: time.Now(), dims: map[string]*fleetcheck.Dimension{},
		holds: map[string][]fleetcheck.Event{}, waits: map[string][]fleetcheck.Span{}}
}

// micros converts a wall time to reference microseconds.
func (r *Recorder) micros(t time.Time) int64 { return t.Sub(r.start).Microseconds() }

// Now is the reference instant, in ms since the run began.
func (r *Recorder) Now() int64 { return time.Since(r.start).Milliseconds() }

// Latest is the reference instant rounded up: the Hi of an event that
// ends now, which must never read earlier than the event's true end (a
// charge rounded down could land at the instant of the grant it follows).
func (r *Recorder) Latest() int64 { return r.ceil(time.Now()) }

// Since converts a wall time to reference ms, rounded down.
func (r *Recorder) Since(t time.Time) int64 {
	d := t.Sub(r.start)
	ms := d.Milliseconds()
	if d < 0 && d%time.Millisecond != 0 {
		ms--
	}
	return ms
}

// ceil converts a wall time to reference ms, rounded up.
func (r *Recorder) ceil(t time.Time) int64 {
	d := t.Sub(r.start)
	ms := d.Milliseconds()
	if d > 0 && d%time.Millisecond != 0 {
		ms++
	}
	return ms
}

// Limit declares a dimension.
func (r *Recorder) Limit(name string, l fleetcheck.Limit) {
	r.mu.Lock()
	r.dims[name] = &fleetcheck.Dimension{Name: name, Limit: l}
	r.mu.Unlock()
}

// Add records an event.
func (r *Recorder) Add(dim string, e fleetcheck.Event) {
	r.mu.Lock()
	d := r.dims[dim]
	d.Events = append(d.Events, e)
	r.mu.Unlock()
}

// Waited records a caller waiting for a concurrent dimension from from
// to to.
func (r *Recorder) Waited(dim string, from, to time.Time) {
	r.mu.Lock()
	r.waits[dim] = append(r.waits[dim], fleetcheck.Span{From: r.micros(from), To: r.micros(to)})
	r.mu.Unlock()
}

// Held records a hold of cost on a concurrent dimension by lease, from
// the instant its holder got it (Release false) or until the instant the
// holder stopped using it (Release true), for SlotUse; the history's
// Grant and Release events are recorded apart.
func (r *Recorder) Held(dim, lease string, cost int64, at time.Time, release bool) {
	e := fleetcheck.Event{Kind: fleetcheck.Grant, Lo: r.micros(at), Hi: r.micros(at), Cost: cost, Lease: lease}
	if release {
		e.Kind = fleetcheck.Release
	}
	r.mu.Lock()
	r.holds[dim] = append(r.holds[dim], e)
	r.mu.Unlock()
}

// SlotUse returns fleetcheck.SlotUse of a concurrent dimension, from its
// holds and waits at their instants to the microsecond.
func (r *Recorder) SlotUse(name string) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := fleetcheck.Dimension{Name: name, Limit: r.dims[name].Limit, Events: r.holds[name]}
	return fleetcheck.SlotUse(d, r.waits[name])
}

// Dimension returns a copy of a dimension's history.
func (r *Recorder) Dimension(name string) fleetcheck.Dimension {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := *r.dims[name]
	d.Events = append([]fleetcheck.Event(nil), d.Events...)
	return d
}
