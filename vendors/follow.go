package vendors

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/ontopix/sluice/bucket"
)

// DefaultFollowFloor is the default follow floor (see WithFollowFloor): a
// reported limit is followed down to a tenth of the published one at most.
const DefaultFollowFloor = 0.1

// WithFollowFloor sets the lowest fraction of a dimension's published limit
// that following a vendor's reported limit may set: a header reporting
// less (a limit of 10 tokens a minute, say) is implausible and ignored,
// with the remaining value beside it, so that absurd values cannot freeze
// the fleet (see Reaction.Ignored). The default is
// DefaultFollowFloor; fraction is clamped to [0.01, 1], and 1 keeps every
// bucket at its published limit.
func WithFollowFloor(fraction float64) ReactorOption {
	return func(r *Reactor) {
		if math.IsNaN(fraction) {
			fraction = DefaultFollowFloor
		}
		r.floor = min(max(fraction, 0.01), 1)
	}
}

// followLimits reconfigures the buckets of dimensions whose reported limit
// differs from the one they were last put at, and restores those whose
// lower limit no response has confirmed for two refill periods.
func (r *Reactor) followLimits(ctx context.Context, s Signals, now time.Time, errs []error) ([]string, []error) {
	var done []string
	for _, d := range r.profile.Dimensions {
		if d.Config.Type == bucket.Concurrent || d.Limit <= 0 {
			continue
		}
		target, ok := r.followTarget(d, s.Metric(d.Metric).Limit, now)
		if !ok {
			continue
		}
		changed, err := r.follow1(ctx, d, target)
		if err != nil {
			errs = append(errs, fmt.Errorf("vendors: following %s's limit to %d: %w", d.Name, target, err))
			continue
		}
		if changed {
			done = append(done, d.Name)
		}
	}
	return done, errs
}

// followTarget returns the limit d's bucket should follow now: the reported
// limit, between the floor and the published limit; or, with no report,
// the published limit once a lower one this Reactor applied went
// unconfirmed for two refill periods. ok is false when there is nothing to
// do.
func (r *Reactor) followTarget(d Dimension, lim Count, now time.Time) (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !lim.Known || lim.Value <= 0 {
		last, seen := r.applied[d.Name]
		if !seen || last >= d.Limit || now.Sub(r.lowSeen[d.Name]) <= 2*d.Config.RefillPeriod {
			return 0, false
		}
		return d.Limit, true
	}
	if lim.Value < r.floorOf(d) {
		return 0, false // implausible: ignored (see implausible.go)
	}
	if lim.Value < d.Limit && r.unsettled(d, now) {
		return 0, false // not believed yet (see flap.go)
	}
	if lim.Value < d.Limit && r.unstable(d.Name, now) {
		// Flapping (see flap.go): back to the published limit.
		if last, seen := r.applied[d.Name]; !seen || last >= d.Limit {
			return 0, false
		}
		return d.Limit, true
	}
	target := min(lim.Value, d.Limit)
	if target < d.Limit {
		r.lowSeen[d.Name] = now
	}
	if last, seen := r.applied[d.Name]; seen && last == target {
		return 0, false
	}
	return target, true
}

// follow1 puts d's bucket at the profile scaled to target, unless it is
// there already or its configuration is not one following produces (an
// operator's own). The write is conditional on the configuration read, so
// a change made meanwhile is never overwritten. It reports whether the
// bucket changed.
func (r *Reactor) follow1(ctx context.Context, d Dimension, target int64) (bool, error) {
	cfg := ScaleConfig(d.Config, target, d.Limit)
	level := 0
	if cuttable(d) {
		level = r.cutLevel(d, r.clock.Now())
	}
	changed, err := r.put(ctx, d, func(read bucket.Config) bucket.Config {
		// A burst cut by another process stays cut, at its level at
		// least: that process gives it back (see quantized.go).
		return withBurst(d, cfg, max(level, cutLevelOf(d, read)))
	})
	if err != nil {
		return false, err
	}
	if cuttable(d) {
		r.mu.Lock()
		r.cut[d.Name] = level
		r.cutPut[d.Name] = r.clock.Now()
		r.mu.Unlock()
	}
	r.remember(d.Name, target)
	return changed, nil
}

func (r *Reactor) remember(dim string, limit int64) {
	r.mu.Lock()
	r.applied[dim] = limit
	r.mu.Unlock()
}

// followed reports whether c is d's profile configuration or
// ScaleConfig of it for some reported limit below the published one, either
// with its burst cut to one request at some level (see quantized.go) when
// d is a requests dimension: a configuration the Reactor may change.
func followed(d Dimension, c bucket.Config) bool {
	if scaled(d, c) {
		return true
	}
	if !cuttable(d) || c.Capacity != 1 {
		return false
	}
	_, ok := cutFollowed(d, c)
	return ok
}

// cutFollowed returns the level at which c is a scaled configuration of
// d with its burst cut, and whether it is one: the scaled configurations
// whose refill amount c has, at every level.
func cutFollowed(d Dimension, c bucket.Config) (int, bool) {
	A, L := d.Config.RefillAmount, d.Limit
	lo := ceilMulDiv(c.RefillAmount, L, A)
	if c.RefillAmount == 1 {
		lo = 1
	}
	hi := min(ceilMulDiv(c.RefillAmount+1, L, A)-1, L, lo+4096)
	for t := lo; t <= hi; t++ {
		s := ScaleConfig(d.Config, t, L)
		for level := 1; level <= maxCutLevel; level++ {
			if withBurst(d, s, level) == c {
				return level, true
			}
		}
	}
	return 0, false
}

// scaled reports whether c is d's profile configuration or ScaleConfig of
// it for some reported limit below the published one. It tries the
// reported limits that give c's capacity, at most a few thousand.
func scaled(d Dimension, c bucket.Config) bool {
	if c == d.Config {
		return true
	}
	C, L := d.Config.Capacity, d.Limit
	if c.Capacity < 1 || C < 1 || c.Capacity > C || c.Type != d.Config.Type {
		return false
	}
	// ScaleConfig's capacity is max(1, ⌊C·t/L⌋): t from ⌈k·L/C⌉ up to
	// ⌈(k+1)·L/C⌉ − 1 gives capacity k (from 1 when k is 1).
	lo := ceilMulDiv(c.Capacity, L, C)
	if c.Capacity == 1 {
		lo = 1
	}
	hi := min(ceilMulDiv(c.Capacity+1, L, C)-1, L-1, lo+4096)
	for t := lo; t <= hi; t++ {
		if ScaleConfig(d.Config, t, L) == c {
			return true
		}
	}
	return false
}

// ceilMulDiv returns ⌈a·b/c⌉ for a, b >= 0 and c > 0, saturating at
// math.MaxInt64.
func ceilMulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return math.MaxInt64
	}
	q, rem := bits.Div64(hi, lo, uint64(c))
	if rem != 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}
