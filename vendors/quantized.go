package vendors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
)

// A profile's requests bucket holds about a second's worth, the burst a
// vendor bucket refilled continuously allows. A vendor may instead count
// its per-minute request limit in each second, a calendar second or the
// last one ("60,000 RPM may be enforced as 1,000 requests per second"):
// a full bucket's burst and the refill that follows it then land in one
// second, which holds one second's limit. The headers cannot show it (they
// describe the minute), but the vendor's 429s do: a requests bucket built
// for the continuous reading draws none from a vendor that reads so. So a
// rate-limit 429 that names the requests limit cuts the bucket's burst to
// one request for quantizedFor windows from the last such 429, and its
// rate as far as it takes to keep the room for arrival jitter the
// profile's bucket kept (see withBurst): one request plus a second's
// refill then stays within a second's limit, whichever second the vendor
// counts. The bucket gets its burst and its rate back once no 429 has
// named requests for that long.

// quantizedFor is how long, in a dimension's windows, a requests bucket
// keeps its burst cut after the last 429 that named requests.
const quantizedFor = 2

// quantize records that c, a rate-limit 429 seen at now, names the
// requests limit, for every requests dimension whose burst it cuts.
func (r *Reactor) quantize(c Classification, now time.Time) {
	if c.Kind != RateLimited || c.Metric != Requests {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.profile.Dimensions {
		if cuttable(d) {
			r.quantized[d.Name] = now
		}
	}
}

// cuttable reports whether d is a requests bucket with a burst to cut.
func cuttable(d Dimension) bool {
	return d.Metric == Requests && d.Config.Type == bucket.Requests && d.Config.Capacity > 1 && d.Window > 0
}

// burstCut reports whether d's burst is cut at now.
func (r *Reactor) burstCut(d Dimension, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.quantized[d.Name]
	return ok && now.Sub(at) < quantizedFor*d.Window
}

// withBurst returns cfg, the profile's configuration of d for some limit,
// with its burst cut to one request when cut is true. The cut bucket
// keeps the room for arrival jitter the profile's bucket kept: that bucket
// holds C of the vendor's second's worth B, refilling r a second, so
// requests may arrive up to M = (B − C) ÷ r later than admitted without
// exceeding B; cut, it refills r' = (B − 1) ÷ (1 + M) a second, so that one
// request plus what it refills in a second and M stays within B.
func withBurst(d Dimension, cfg bucket.Config, cut bool) bucket.Config {
	if !cut || cfg.Capacity <= 1 || cfg.RefillAmount <= 0 || cfg.RefillPeriod <= 0 || d.Config.RefillAmount <= 0 {
		return cfg
	}
	sec := float64(time.Second)
	r := float64(cfg.RefillAmount) / float64(cfg.RefillPeriod) * sec
	b := float64(d.Rule.BurstMilli) / 1000 * float64(cfg.RefillAmount) / float64(d.Config.RefillAmount)
	m := max(b-float64(cfg.Capacity), 0) / r
	cfg.Capacity = 1
	cfg.CostPerCall = min(cfg.CostPerCall, 1)
	if b > 1 {
		per := time.Duration(math.Ceil(float64(cfg.RefillAmount)*(1+m)/(b-1)*1000)) * time.Millisecond
		cfg.RefillPeriod = max(cfg.RefillPeriod, per)
	}
	return cfg
}

// cutBursts puts each requests bucket whose burst should be cut, or given
// back, at the profile's configuration for the limit it follows with its
// burst as it should be; an operator's configuration is left alone (see
// follow1). It returns the dimensions changed.
func (r *Reactor) cutBursts(ctx context.Context, now time.Time, errs []error) ([]string, []error) {
	var done []string
	for _, d := range r.profile.Dimensions {
		if !cuttable(d) {
			continue
		}
		cut := r.burstCut(d, now)
		r.mu.Lock()
		have, limit := r.cut[d.Name], r.applied[d.Name]
		r.mu.Unlock()
		if cut == have {
			continue
		}
		if limit <= 0 {
			limit = d.Limit
		}
		cfg := withBurst(d, ScaleConfig(d.Config, limit, d.Limit), cut)
		changed, err := r.put(ctx, d, func(bucket.Config) bucket.Config { return cfg })
		if err != nil {
			errs = append(errs, fmt.Errorf("vendors: setting %s's burst: %w", d.Name, err))
			continue
		}
		r.mu.Lock()
		r.cut[d.Name] = cut
		r.mu.Unlock()
		if changed {
			done = append(done, d.Name)
			if cut {
				r.client.Logger().LogAttrs(ctx, slog.LevelInfo, "vendors.burst_cut", slog.String("dimension", d.Name),
					slog.Duration("for", quantizedFor*d.Window))
			}
		}
	}
	return done, errs
}

// put writes want(read) as d's bucket, read being its configuration,
// unless it is there already or read is not a configuration the Reactor
// produces (an operator's own). The write is conditional on read, so a
// change made meanwhile is never overwritten. It reports whether the
// bucket changed.
func (r *Reactor) put(ctx context.Context, d Dimension, want func(read bucket.Config) bucket.Config) (bool, error) {
	cur, err := r.client.GetBucket(ctx, d.Name)
	if err != nil {
		return false, err
	}
	read := cur.Bucket.Config
	if !followed(d, read) {
		return false, nil // an operator's configuration
	}
	cfg := want(read)
	if read == cfg {
		return false, nil
	}
	err = r.client.PutBucket(ctx, sluice.Bucket{Name: d.Name, Config: cfg}, sluice.IfUnchanged(&read))
	if errors.Is(err, sluice.ErrConflict) {
		return false, nil // changed meanwhile: the next response decides again
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// isCut reports whether c, a configuration the Reactor produces for d,
// has its burst cut: a capacity of one where the scaling alone gives more.
func isCut(d Dimension, c bucket.Config) bool {
	return c.Capacity == 1 && !scaled(d, c)
}
