package history

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// Defaults of the options.
const (
	// DefaultFlushEvery is how often Run writes the totals to the store.
	DefaultFlushEvery = 10 * time.Second
	// DefaultLiveWindow is how long the per-second live view reaches back.
	DefaultLiveWindow = 15 * time.Minute
	// DefaultMaxSeries is the most (dimension, caller) pairs the live view
	// keeps; see WithMaxSeries.
	DefaultMaxSeries = 1000
	// DefaultMaxEvents is how many events Events can return.
	DefaultMaxEvents = 1000
)

// Recorder records what a Client and a Transport did, per (dimension,
// caller): a live view of the last minutes in memory, and, when its store
// keeps usage history (store.Usager), per-minute and per-hour totals
// written to the store every flush interval, which every process of the
// fleet reads back summed. Build one with New, pass Observer to the Client
// (sluice.WithObserver) and TransportEvent to the Transport
// (transport.WithEvents), and run Run in a goroutine.
//
// A Recorder is safe for concurrent use. Its observer callbacks take one
// mutex, never do I/O and never allocate on the steady path.
type Recorder struct {
	st store.Usager // nil: live view only
	// off is set when the store answered that it keeps no usage history
	// (errors.ErrUnsupported): the Recorder keeps the live view only.
	off    atomic.Bool
	clock  func() time.Time // nil: the wall clock, see second
	writer string
	every  time.Duration
	ret    store.UsageRetention
	window int64 // live window in seconds
	slots  int64 // ring length: the power of two at or above window
	maxSer int
	maxEv  int
	tcall  string // caller of transport events

	flushMu sync.Mutex // one flush at a time: rows reach the store in order
	// lastPut is the Updated of the last flush's rows, in Unix ms, under
	// flushMu: each flush's is later, even when the wall clock is set
	// back, as stores ignore a put older than the row they hold.
	lastPut int64

	mu      sync.Mutex
	anchor  time.Time // wall and monotonic time, for second
	latest  int64     // the latest second handed out by second: time never goes back
	last    *series   // the series of the last event
	uses    uint64    // events counted, for the series' age
	closed  bool
	series  map[key]*series
	byDim   map[string][]*series // the series of each dimension, for its reads
	pending map[rowKey]*acc      // ended periods not yet written
	// dropped counts the minute rows not kept because pending was full
	// (maxPending), since the last flush reported them.
	dropped    int
	maxPending int // maxPending; tests lower it
	events     eventRing
}

// key names a series.
type key struct{ dim, caller string }

// rowKey names one of this writer's rows.
type rowKey struct {
	key
	period int64 // seconds: 60 or 3600
	start  int64 // Unix seconds
}

// acc is this writer's running total of one row.
type acc struct {
	start int64 // Unix seconds; 0: none yet
	t     tally
	ver   uint64 // changes made
	sent  uint64 // changes the store has
}

func (a *acc) dirty() bool { return a.ver != a.sent }

// series is one (dimension, caller)'s live ring and current rows.
type series struct {
	key
	used uint64 // Recorder.uses at its last event
	// ring holds one tally per second of the live window, allocated at
	// the first event in its slot; secs[i] is the Unix second ring[i]
	// counts (a stale one is reset before use).
	ring []*tally
	secs []int64
	min  acc
	hour acc
}

// Option configures a Recorder.
type Option func(*Recorder) error

// WithFlushEvery sets how often Run writes to the store; default 10 s.
func WithFlushEvery(d time.Duration) Option {
	return func(r *Recorder) error {
		if d <= 0 {
			return &bucket.FieldError{Field: "flush interval", Value: d, Reason: "must be positive"}
		}
		r.every = d
		return nil
	}
}

// WithRetention sets how long the store keeps the rows; zero fields keep
// their defaults (minute rows 48 h, hour rows 90 days).
func WithRetention(ret store.UsageRetention) Option {
	return func(r *Recorder) error {
		if ret.Minute < 0 || ret.Hour < 0 {
			return &bucket.FieldError{Field: "retention", Value: ret, Reason: "must not be negative"}
		}
		r.ret = ret.WithDefaults()
		return nil
	}
}

// WithClock sets the clock that dates every event and row; default the
// wall clock. Pass the Client's clock (sluice.WithClock) when it has one.
func WithClock(c sluice.Clock) Option {
	return func(r *Recorder) error {
		if c == nil {
			return &bucket.FieldError{Field: "clock", Value: nil, Reason: "must not be nil"}
		}
		r.clock = c.Now
		return nil
	}
}

// WithWriter sets the id the rows are written under; default a random
// UUID. It must be unique to this process's lifetime: two processes that
// share one overwrite each other's rows.
func WithWriter(id string) Option {
	return func(r *Recorder) error {
		if id == "" || len(id) > store.MaxWriterLen {
			return &bucket.FieldError{Field: "writer", Value: id, Reason: fmt.Sprintf("must be 1 to %d bytes", store.MaxWriterLen)}
		}
		r.writer = id
		return nil
	}
}

// WithLiveWindow sets how far back the per-second live view reaches;
// default 15 min, at most 24 h.
func WithLiveWindow(d time.Duration) Option {
	return func(r *Recorder) error {
		if d < time.Minute || d > 24*time.Hour {
			return &bucket.FieldError{Field: "live window", Value: d, Reason: "must be between 1m and 24h"}
		}
		r.window = int64(d / time.Second)
		return nil
	}
}

// WithMaxSeries caps the (dimension, caller) pairs kept in the live view;
// default 1,000. Past the cap, the pair used the longest ago is dropped from
// the live view (its totals not yet written stay until they are). Each
// pair's live view takes about 16 KB, plus 250 bytes per second it saw
// activity in: at most 240 KB with a 15-minute window.
func WithMaxSeries(n int) Option {
	return func(r *Recorder) error {
		if n < 1 {
			return &bucket.FieldError{Field: "max series", Value: n, Reason: "must be at least 1"}
		}
		r.maxSer = n
		return nil
	}
}

// WithTransportCaller sets the caller TransportEvent records vendor
// responses under; default "". Set it to the Client's Config.Caller, the
// name the Transport's acquisitions are made under, to see them together.
func WithTransportCaller(name string) Option {
	return func(r *Recorder) error {
		r.tcall = name
		return nil
	}
}

// WithMaxEvents sets how many events Events keeps; default 1,000.
func WithMaxEvents(n int) Option {
	return func(r *Recorder) error {
		if n < 1 {
			return &bucket.FieldError{Field: "max events", Value: n, Reason: "must be at least 1"}
		}
		r.maxEv = n
		return nil
	}
}

// New returns a Recorder over st. When st keeps usage history
// (store.Usager), Flush and Run write to it and Query reads the fleet's
// totals from it; otherwise the Recorder keeps the live view only: it
// writes nothing, and Query answers from this process's last minutes.
func New(st store.Store, opts ...Option) (*Recorder, error) {
	r := &Recorder{
		anchor: time.Now(), writer: store.NewLeaseID().String(), every: DefaultFlushEvery,
		ret: store.DefaultUsageRetention, window: int64(DefaultLiveWindow / time.Second),
		maxSer: DefaultMaxSeries, maxEv: DefaultMaxEvents,
		series: make(map[key]*series), byDim: make(map[string][]*series), pending: make(map[rowKey]*acc), maxPending: maxPending,
	}
	if u, ok := contract.Unwrap(st).(store.Usager); ok {
		r.st = u
	}
	for _, o := range opts {
		if err := o(r); err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
	}
	r.events.max = r.maxEv
	r.slots = 1
	for r.slots < r.window {
		r.slots *= 2
	}
	return r, nil
}

// Writer returns the id this Recorder writes its rows under.
func (r *Recorder) Writer() string { return r.writer }

// Writes reports whether the Recorder writes to its store (the store
// keeps usage history).
func (r *Recorder) Writes() bool { return r.usage() != nil }

// usage returns the store's usage history, nil when there is none (the
// store lacks it, or answered that it keeps none).
func (r *Recorder) usage() store.Usager {
	if r.off.Load() {
		return nil
	}
	return r.st
}

// unsupported turns the Recorder to the live view only when err says that
// the store keeps no usage history, and reports whether it did.
func (r *Recorder) unsupported(err error) bool {
	if !errors.Is(err, errors.ErrUnsupported) {
		return false
	}
	r.off.Store(true)
	return true
}

// lookup returns the series of (dim, caller), creating it (and dropping
// the one used the longest ago past the cap). r.mu is held.
func (r *Recorder) lookup(dim, caller string) *series {
	r.uses++
	if s := r.last; s != nil && s.dim == dim && s.caller == caller {
		s.used = r.uses
		return s
	}
	s := r.series[key{dim, caller}]
	if s == nil {
		if len(r.series) >= r.maxSer {
			r.evict()
		}
		s = &series{key: key{dim, caller}, ring: make([]*tally, r.slots), secs: make([]int64, r.slots)}
		r.series[s.key] = s
		r.byDim[dim] = append(r.byDim[dim], s)
	}
	s.used = r.uses
	r.last = s
	return s
}

// evict drops the series used the longest ago from the live view. Its current
// rows move to pending, written or not, so that the series, back within
// the same minute or hour, continues them rather than overwriting them
// with a new count. r.mu is held.
func (r *Recorder) evict() {
	var old *series
	for _, s := range r.series {
		if old == nil || s.used < old.used {
			old = s
		}
	}
	r.park(old.key, &old.min, 60)
	r.park(old.key, &old.hour, 3600)
	delete(r.series, old.key)
	if rest := slices.DeleteFunc(r.byDim[old.dim], func(s *series) bool { return s == old }); len(rest) > 0 {
		r.byDim[old.dim] = rest
	} else {
		delete(r.byDim, old.dim)
	}
	if r.last == old {
		r.last = nil
	}
}

// maxPending bounds the ended rows kept for a store that cannot be
// written (an outage): past it, ended minute rows are dropped, counted
// and reported by the next flush, while hour rows, 60 times fewer, are
// still kept, so that the hours stay whole.
const maxPending = 200_000

// park moves a current row to pending. r.mu is held.
func (r *Recorder) park(k key, a *acc, period int64) {
	if a.start != 0 && period == 60 && len(r.pending) >= r.maxPending {
		r.dropped++
	} else if a.start != 0 {
		c := *a
		r.pending[rowKey{k, period, a.start}] = &c
	}
	*a = acc{}
}

// roll ends s's rows whose period ended at or before now: to pending if
// the store lacks some of their changes, else forgotten. r.mu is held.
func (r *Recorder) roll(s *series, now int64) {
	for _, p := range [2]int64{60, 3600} {
		a := s.row(p)
		if a.start != 0 && a.start+p <= now {
			if a.dirty() {
				r.park(s.key, a, p)
			}
			*a = acc{}
		}
	}
}

// row returns s's current row of period p (60 or 3600 seconds).
func (s *series) row(p int64) *acc {
	if p == 60 {
		return &s.min
	}
	return &s.hour
}

// slot returns s's live tally of second now, reset if it held an older
// second. r.mu is held.
func (r *Recorder) slot(s *series, now int64) *tally {
	i := now & (r.slots - 1)
	t := s.ring[i]
	if t == nil {
		t = new(tally)
		s.ring[i] = t
	}
	if s.secs[i] != now {
		*t, s.secs[i] = newTally(), now
	}
	return t
}

// rows returns s's current minute and hour rows at second now, begun if
// need be (taking back a parked row of the same period), each counted as
// changed; nil when the Recorder writes nothing. r.mu is held.
func (r *Recorder) rows(s *series, now int64) (minute, hour *tally) {
	if r.usage() == nil {
		return nil, nil
	}
	r.roll(s, now)
	var out [2]*tally
	for i, p := range [2]int64{60, 3600} {
		a := s.row(p)
		if a.start == 0 {
			a.start, a.t = now-mod(now, p), newTally()
			k := rowKey{s.key, p, a.start}
			if q := r.pending[k]; q != nil {
				*a = *q
				delete(r.pending, k)
			}
		}
		a.ver++
		out[i] = &a.t
	}
	return out[0], out[1]
}

// mod is a non-negative remainder.
func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// tallies returns the tallies an event at second now changes for s: the
// live slot and, when the Recorder writes, the minute and hour rows (nil
// otherwise). r.mu is held.
func (r *Recorder) tallies(s *series, now int64) [3]*tally {
	m, h := r.rows(s, now)
	return [3]*tally{r.slot(s, now), m, h}
}
