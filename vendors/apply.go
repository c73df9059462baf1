package vendors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
)

// Reactor turns what a vendor's responses say into changes to a fleet's
// shared buckets, so that one process's 429 or one response's headers
// pause or slow every process drawing on the same vendor limit:
//
//   - A retryable rate-limit 429 with a known delay cools the dimension it
//     names down until the delay has passed (Client.CooldownFor what is left
//     of it when the store is called, at least 1 ms); every time-based
//     dimension of the profile when it names none. A 429 without a delay
//     empties the dimension instead (Client.Sync to zero), so that it refills
//     at its rate.
//   - Every response's rate-limit headers lower each dimension's balance to
//     what the vendor reports as remaining (Client.Sync), never raising it.
//   - A limit the vendor lowers at runtime (Azure's shared pool does; the
//     *-limit-* headers show it) reconfigures the dimension's bucket to the
//     profile scaled to the reported limit, never below the follow floor
//     (WithFollowFloor) and never above the profile, and back when the full
//     limit is reported again, or when no response has reported the lower
//     limit for two refill periods. A bucket whose configuration is neither
//     the profile's nor a scaling of it (an operator changed it) is left
//     alone. Following never forgives a bucket's debt.
//   - A delay longer than the dimension's window makes plausible (see
//     WithCooldownBound) is clamped to the bound, logged as
//     "vendors.cooldown_clamped" and counted (Implausible, and the
//     Reaction's Clamped): one response saying "retry after a day" does
//     not stop a per-minute limit fleet-wide for a day.
//   - A quota or spend cap, and a request larger than the limit, cool nothing
//     down: they are not rate limits, and Observe reports them as the
//     response's error (ErrQuotaExhausted, ErrRequestTooLarge).
//   - A store without cooldowns (no store.Cooler: Client.CooldownFor
//     answers errors.ErrUnsupported) has a 429's dimension emptied as for
//     a 429 without a delay; one without Sync (no store.Syncer) is left
//     as it is by 429s it cannot cool down and by headers, with no error:
//     those dimensions are missing from the Reaction's Cooled and Synced.
//
// A Reactor is safe for concurrent use. Each process of a fleet runs its
// own; they agree through the store.
type Reactor struct {
	client  *sluice.Client
	profile Profile
	clock   sluice.Clock
	sync    bool
	follow  bool

	floor float64 // the lowest fraction of a published limit that following may set

	coolBound   float64       // the longest plausible cooldown, in a dimension's windows
	implausible atomic.Uint64 // cooldowns clamped to the bound

	ignored atomic.Uint64 // reported limits ignored as implausible (see implausible.go)

	mu        sync.Mutex
	applied   map[string]int64      // dimension → the limit its bucket was last put at
	lowSeen   map[string]time.Time  // dimension → when a response last reported it below its published limit
	flaps     map[string]*flapState // dimension → its limit reports' recent flaps (see flap.go)
	held      map[string]time.Time  // dimension → until when this Reactor held it to a calendar window (see window.go)
	counts    map[string]*countSeen // dimension → the calendar count its resets showed (see window.go)
	quantized map[string]time.Time  // requests dimension → when a 429 last named requests (see quantized.go)
	cut       map[string]int        // requests dimension → the level at which this Reactor last put its burst cut (0: not cut)
	cutPut    map[string]time.Time  // requests dimension → when this Reactor last put its burst's level
	widened   map[string]int        // requests dimension → the steps this Reactor widened its cut's room (see quantized.go)
}

// ReactorOption configures a Reactor.
type ReactorOption func(*Reactor)

// WithoutSync stops the Reactor from lowering balances to the remaining
// values of the vendor's headers; cooldowns after 429s still apply.
func WithoutSync() ReactorOption { return func(r *Reactor) { r.sync = false } }

// WithoutLimitFollowing stops the Reactor from reconfiguring buckets when
// the vendor reports a limit other than the published one.
func WithoutLimitFollowing() ReactorOption { return func(r *Reactor) { r.follow = false } }

// DefaultCooldownBound is the longest cooldown a Reactor applies to a
// dimension, in its plausible windows (see WithCooldownBound).
const DefaultCooldownBound = 2.0

// WithCooldownBound bounds a 429's cooldown of a dimension at windows
// times the dimension's plausible window: the longer of its published
// window (a minute for RPM and TPM, a day for daily limits) and the time
// its bucket takes to refill from empty. A longer delay is clamped to the
// bound, logged and counted. The default is DefaultCooldownBound (2: a
// per-minute limit cools at most 2 minutes); 0 or less means the default.
// No cooldown is ever longer than sluice.MaxCooldown.
func WithCooldownBound(windows float64) ReactorOption {
	return func(r *Reactor) { r.coolBound = windows }
}

// WithReactorClock sets the clock the Reactor reads responses' arrival
// times from; use the Client's clock (sluice.WithClock) in tests. The
// default is the system clock.
func WithReactorClock(c sluice.Clock) ReactorOption { return func(r *Reactor) { r.clock = c } }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// NewReactor returns a Reactor that applies the signals of p's vendor to
// p's dimensions through c. The buckets must exist (Profile.Buckets, or the
// limits file's presets).
func NewReactor(c *sluice.Client, p Profile, opts ...ReactorOption) *Reactor {
	r := &Reactor{client: c, profile: p, clock: systemClock{}, sync: true, follow: true, floor: DefaultFollowFloor,
		applied: map[string]int64{}, lowSeen: map[string]time.Time{}, flaps: map[string]*flapState{}, held: map[string]time.Time{}, counts: map[string]*countSeen{},
		quantized: map[string]time.Time{}, cut: map[string]int{}, cutPut: map[string]time.Time{}, widened: map[string]int{}}
	for _, o := range opts {
		o(r)
	}
	if !(r.coolBound > 0) {
		r.coolBound = DefaultCooldownBound
	}
	return r
}

// Implausible returns how many cooldowns the Reactor clamped to their
// bound (see WithCooldownBound) since it was made.
func (r *Reactor) Implausible() uint64 { return r.implausible.Load() }

// coolBound returns the longest cooldown plausible for dimension name;
// sluice.MaxCooldown when the profile does not know it.
func (r *Reactor) cooldownBound(name string) time.Duration {
	for _, d := range r.profile.Dimensions {
		if d.Name != name {
			continue
		}
		w := d.Window
		if c := d.Config; c.RefillAmount > 0 && c.RefillPeriod > 0 {
			fill := time.Duration(float64(c.RefillPeriod) * float64(c.Capacity) / float64(c.RefillAmount))
			w = max(w, fill)
		}
		if w <= 0 {
			break
		}
		if b := float64(w) * r.coolBound; b < float64(sluice.MaxCooldown) {
			return max(time.Duration(b), time.Millisecond)
		}
		break
	}
	return sluice.MaxCooldown
}

// Reaction reports what Observe did.
type Reaction struct {
	// Classification is what the response meant (see Classify).
	Classification Classification
	// Cooled lists the dimensions a cooldown was applied to.
	Cooled []string
	// Clamped lists the cooled dimensions whose delay was longer than
	// plausible and was clamped to the bound (see WithCooldownBound).
	Clamped []string
	// Unstable lists the dimensions whose limit reports flap (see
	// flap.go): a lower limit reported for them is neither followed nor
	// synced.
	Unstable []string
	// Unconfirmed lists the dimensions given a lower limit not believed
	// yet: reported for less than a tenth of the dimension's window, with
	// no rate-limit 429 on its metric since. Neither it nor the remaining
	// beside it was applied.
	Unconfirmed []string
	// Ignored lists the dimensions whose reported limit was implausible,
	// below the follow floor (see WithFollowFloor): neither it nor the
	// remaining value beside it was applied.
	Ignored []string
	// Synced lists the dimensions whose balance the headers were applied to
	// (a sync that found the balance already lower is listed too).
	Synced []string
	// Held lists the dimensions synced below the remaining value their
	// headers reported, or cooled down, because the vendor counts them per
	// calendar window, not in a bucket that refills continuously: each
	// grants no more than the vendor reported remaining before the reset
	// it reported.
	Held []string
	// Resized lists the dimensions whose bucket was reconfigured to follow
	// a limit change, or whose burst was cut to one request after a 429
	// that named requests, widened, or given back (see quantized.go).
	Resized []string
	// Drift lists, for every token dimension synced, Sluice's balance
	// beside what the vendor reported as remaining, before the sync
	// lowered it. Requests dimensions are left out: their buckets hold a
	// second's worth where the vendor reports a minute's.
	Drift []Drift
}

// Drift is how far Sluice's belief about one dimension was from the
// vendor's own count when a response reported it (its
// x-ratelimit-remaining-* or anthropic-ratelimit-*-remaining header).
type Drift struct {
	// Dimension is the dimension's name.
	Dimension string
	// Believed is Sluice's balance, refilled to the moment of the sync, in
	// whole tokens (rounded down; negative when in debt).
	Believed int64
	// Reported is what the vendor reported as remaining (Anthropic rounds
	// its token counts to the nearest thousand; the lower bound is used).
	Reported int64
}

// Tokens returns Believed − Reported: positive when Sluice believed it
// had tokens the vendor had already counted (the sync then lowered the
// balance), negative when Sluice was the more cautious. Calls the vendor
// admitted but whose response headers Sluice had not yet seen, and
// settlements not yet made, make it move both ways; a drift that stays
// positive says that the profile's cost reading counts less than the
// vendor does.
func (d Drift) Tokens() int64 { return d.Believed - d.Reported }

// Err returns the response's own error: nil for a 2xx, else an *Error
// matching the sentinel for its kind (ErrRateLimited, ErrQuotaExhausted,
// ErrRequestTooLarge, …).
func (r Reaction) Err() error { return r.Classification.Err() }

// Observe applies one response: status is its HTTP status, h its headers
// and body its body, which only a non-2xx response needs (nil is fine for
// a success). The returned error reports failures to reach the store,
// joined; what the response itself meant is in the Reaction.
func (r *Reactor) Observe(ctx context.Context, status int, h http.Header, body []byte) (Reaction, error) {
	now := r.clock.Now()
	if status >= 200 && status < 300 {
		body = nil
	}
	c := Classify(r.profile.Vendor, status, h, body, now)
	re := Reaction{Classification: c}
	re.Ignored = r.ignoreImplausible(c.Signals)
	if c.Kind == RateLimited {
		r.confirmed(c.Metric, now)
		r.quantize(c, now)
	}
	re.Unstable, re.Unconfirmed = r.noteReports(c.Signals, now)
	var errs []error
	if r.follow {
		re.Resized, errs = r.followLimits(ctx, c.Signals, now, errs)
		var cut []string
		cut, errs = r.cutBursts(ctx, now, errs)
		re.Resized = append(re.Resized, cut...)
	}
	if c.Kind == RateLimited {
		re.Cooled, re.Clamped, errs = r.cool(ctx, c, now, errs)
	}
	if r.sync {
		re.Synced, re.Drift, re.Held, errs = r.syncRemaining(ctx, c.Signals, now, errs)
	}
	return re, errors.Join(errs...)
}

// cool applies a 429's cooldown to the dimensions it concerns. One that
// names no dimension of the profile cools them all, each bounded as the
// shortest window's would be: a limit with a longer window (a day's) names
// itself when it is the one exhausted, and every call needs every
// dimension, so a day's delay on all of them would stop the fleet for a
// day on a response that may be a proxy's.
func (r *Reactor) cool(ctx context.Context, c Classification, now time.Time, errs []error) (done, clamped []string, _ []error) {
	dims := r.timeBased(c.Metric)
	until, known := c.CooldownUntil()
	if known {
		until = minTime(until, now.Add(sluice.MaxCooldown))
	}
	bound := r.cooldownBound
	if len(dims) > 1 {
		least := sluice.MaxCooldown
		for _, d := range dims {
			least = min(least, r.cooldownBound(d))
		}
		bound = func(string) time.Duration { return least }
	}
	for _, d := range dims {
		var err error
		if known {
			// What is left of the delay when the store is called: time
			// passes between the response's arrival and each call, and
			// the store refuses an end less than 1 ms after its call.
			left := min(max(until.Sub(r.clock.Now()), time.Millisecond), sluice.MaxCooldown)
			if b := bound(d); left > b {
				r.implausible.Add(1)
				r.client.Logger().LogAttrs(ctx, slog.LevelWarn, "vendors.cooldown_clamped",
					slog.String("dimension", d), slog.Duration("delay", left), slog.Duration("bound", b),
					slog.Int("status", c.Status))
				clamped = append(clamped, d)
				left = b
			}
			_, err = r.client.CooldownFor(ctx, d, left)
		}
		if !known || errors.Is(err, errors.ErrUnsupported) {
			// No delay, or a store without cooldowns: empty the bucket.
			_, err = r.client.Sync(ctx, d, 0)
		}
		if errors.Is(err, errors.ErrUnsupported) {
			continue // a store that can do neither: nothing to apply
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("vendors: cooling %s down after a 429: %w", d, err))
			continue
		}
		done = append(done, d)
	}
	return done, clamped, errs
}

// timeBased returns the profile's time-based dimension for m, or all of
// them when m is empty or not one of the profile's.
func (r *Reactor) timeBased(m Metric) []string {
	if m != "" {
		for _, d := range r.profile.Dimensions {
			if d.Metric == m && d.Config.Type != bucket.Concurrent {
				return []string{d.Name}
			}
		}
	}
	var out []string
	for _, d := range r.profile.Dimensions {
		if d.Config.Type != bucket.Concurrent {
			out = append(out, d.Name)
		}
	}
	return out
}

// syncRemaining lowers each reported dimension to its remaining value, or
// to less when the vendor counts it per calendar window (see window.go),
// and returns the drift it found on each and the dimensions held to a
// calendar window. The dimensions are synced at once: a response costs
// one store round trip on the caller's path, not one per dimension.
func (r *Reactor) syncRemaining(ctx context.Context, s Signals, now time.Time, errs []error) (done []string, drift []Drift, held []string, _ []error) {
	type syncPlan struct {
		d            Dimension
		rem, to, bnd int64
		calendar     bool
		res          sluice.SyncResult
		err          error
	}
	var plans []syncPlan
	for _, d := range r.profile.Dimensions {
		if d.Config.Type == bucket.Concurrent {
			continue
		}
		rem, ok := s.Metric(d.Metric).RemainingFloor()
		if !ok {
			continue
		}
		if r.implausibleLimit(d, s) || r.distrusted(d, s) {
			continue // its headers are not to be believed (yet)
		}
		rem = min(rem, bucket.MaxCapacity)
		to := rem
		bound, calendar := r.calendarBound(d, s, rem, now)
		if calendar {
			to = min(to, max(bound, 0))
		}
		plans = append(plans, syncPlan{d: d, rem: rem, to: to, bnd: bound, calendar: calendar})
	}
	var wg sync.WaitGroup
	for i := range plans {
		p := &plans[i]
		if len(plans) == 1 {
			p.res, p.err = r.client.Sync(ctx, p.d.Name, p.to)
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.res, p.err = r.client.Sync(ctx, p.d.Name, p.to)
		}()
	}
	wg.Wait()
	for _, p := range plans {
		d, rem, bound := p.d, p.rem, p.bnd
		if errors.Is(p.err, errors.ErrUnsupported) {
			continue // a store without Sync: the headers change nothing
		}
		if p.err != nil {
			errs = append(errs, fmt.Errorf("vendors: syncing %s to %d remaining: %w", d.Name, p.to, p.err))
			continue
		}
		done = append(done, d.Name)
		if d.Config.Type == bucket.Tokens {
			drift = append(drift, Drift{Dimension: d.Name, Believed: floorDiv(int64(p.res.Before), 1000), Reported: rem})
		}
		if !p.calendar || bound >= rem {
			continue
		}
		if bound < 0 {
			if _, err := r.holdFor(ctx, d, bound, now); err != nil && !errors.Is(err, errors.ErrUnsupported) {
				errs = append(errs, err)
				continue
			}
		}
		held = append(held, d.Name)
	}
	return done, drift, held, errs
}

// floorDiv returns a/b rounded toward minus infinity, for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// ScaleConfig returns c, a profile dimension's bucket for a published limit
// of published, scaled to a vendor's reported limit of reported (at most
// published): capacity and refill amount are multiplied by
// reported/published and rounded down, to at least 1, and the refill
// period is kept. Every vendor rule admits at least as much at a limit of
// f·L as f times what it admits at L, so the scaled bucket stays under the
// rule at the reported limit. The maximum debt is scaled too.
func ScaleConfig(c bucket.Config, reported, published int64) bucket.Config {
	if reported >= published || published <= 0 || c.Type == bucket.Concurrent {
		return c
	}
	scale := func(v int64) int64 {
		if v <= 0 {
			return v
		}
		return max(1, mulDivFloor(v, reported, published))
	}
	out := c
	out.Capacity = scale(c.Capacity)
	out.RefillAmount = scale(c.RefillAmount)
	if c.MaxDebt > 0 {
		out.MaxDebt = scale(c.MaxDebt)
	}
	if out.CostPerCall > out.Capacity {
		out.CostPerCall = out.Capacity
	}
	return out
}

// mulDivFloor returns floor(v*n/d) for v >= 0 and 0 <= n <= d, exactly.
func mulDivFloor(v, n, d int64) int64 {
	hi, lo := bits.Mul64(uint64(v), uint64(n))
	q, _ := bits.Div64(hi, lo, uint64(d)) // hi < d because n <= d
	return int64(q)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
