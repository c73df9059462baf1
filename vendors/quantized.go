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
//
// A 429 that names requests while the cut is in place, at least
// widenAfter after the cut or its last widening was put, shows arrival
// jitter larger than the room kept: the Reactor then widens the room,
// twice as much at each step (maxCutLevel levels in all), lowering the
// rate further. The room returns to the profile's when the burst is given
// back.

// quantizedFor is how long, in a dimension's windows, a requests bucket
// keeps its burst cut after the last 429 that named requests.
const quantizedFor = 2

// maxCutLevel is the most cut levels a burst has: level 1 keeps the
// profile's room for arrival jitter, and each level above doubles it.
const maxCutLevel = 3

// widenAfter is how long after a cut level was put a 429 on requests
// widens it: a request admitted before the change, still on its way, does
// not.
const widenAfter = 2 * time.Second

// quantize records that c, a rate-limit 429 seen at now, names the
// requests limit, for every requests dimension whose burst it cuts, and
// widens the room of a cut this Reactor put at least widenAfter before.
func (r *Reactor) quantize(c Classification, now time.Time) {
	if c.Kind != RateLimited || c.Metric != Requests {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.profile.Dimensions {
		if !cuttable(d) {
			continue
		}
		at, cut := r.quantized[d.Name]
		cut = cut && now.Sub(at) < quantizedFor*d.Window
		level := r.widened[d.Name]
		if !cut {
			level = 0
		} else if lv := r.cut[d.Name]; lv == level+1 && lv < maxCutLevel && now.Sub(r.cutPut[d.Name]) >= widenAfter {
			level++ // the cut this Reactor put is in place, and too narrow
		}
		r.widened[d.Name] = level
		r.quantized[d.Name] = now
	}
}

// cuttable reports whether d is a requests bucket with a burst to cut.
func cuttable(d Dimension) bool {
	return d.Metric == Requests && d.Config.Type == bucket.Requests && d.Config.Capacity > 1 && d.Window > 0
}

// cutLevel returns the level at which d's burst is cut at now: 0 when it
// is not, else 1 plus the steps its room was widened.
func (r *Reactor) cutLevel(d Dimension, now time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.quantized[d.Name]
	if !ok || now.Sub(at) >= quantizedFor*d.Window {
		return 0
	}
	return 1 + r.widened[d.Name]
}

// withBurst returns cfg, the profile's configuration of d for some limit,
// with its burst cut to one request at level (none at level 0). The cut
// bucket keeps the room for arrival jitter the profile's bucket kept: that
// bucket holds C of the vendor's second's worth B, refilling r a second,
// so requests may arrive up to M = (B − C) ÷ r later than admitted without
// exceeding B; cut, it refills r' = (B − 1) ÷ (1 + M) a second, so that one
// request plus what it refills in a second and M stays within B. Each
// level above 1 doubles M, from at least minWidenRoom.
func withBurst(d Dimension, cfg bucket.Config, level int) bucket.Config {
	if level <= 0 || cfg.Capacity <= 1 || cfg.RefillAmount <= 0 || cfg.RefillPeriod <= 0 || d.Config.RefillAmount <= 0 {
		return cfg
	}
	sec := float64(time.Second)
	r := float64(cfg.RefillAmount) / float64(cfg.RefillPeriod) * sec
	b := float64(d.Rule.BurstMilli) / 1000 * float64(cfg.RefillAmount) / float64(d.Config.RefillAmount)
	m := max(b-float64(cfg.Capacity), 0) / r
	if level > 1 {
		m = max(m, minWidenRoom.Seconds()) * float64(int(1)<<(min(level, maxCutLevel)-1))
	}
	cfg.Capacity = 1
	cfg.CostPerCall = min(cfg.CostPerCall, 1)
	if b > 1 {
		per := time.Duration(math.Ceil(float64(cfg.RefillAmount)*(1+m)/(b-1)*1000)) * time.Millisecond
		cfg.RefillPeriod = max(cfg.RefillPeriod, per)
	}
	return cfg
}

// minWidenRoom is the least room for arrival jitter a widened cut
// doubles: a profile may keep none (WithRequestMargin(0)).
const minWidenRoom = 50 * time.Millisecond

// cutBursts puts each requests bucket whose burst should be cut, widened,
// or given back, at the profile's configuration for the limit it follows
// with its burst as it should be; an operator's configuration is left
// alone (see follow1), and a cut another process put at a higher level is
// not lowered. It returns the dimensions changed.
func (r *Reactor) cutBursts(ctx context.Context, now time.Time, errs []error) ([]string, []error) {
	var done []string
	for _, d := range r.profile.Dimensions {
		if !cuttable(d) {
			continue
		}
		level := r.cutLevel(d, now)
		r.mu.Lock()
		have, limit := r.cut[d.Name], r.applied[d.Name]
		r.mu.Unlock()
		if level == have {
			continue
		}
		if limit <= 0 {
			limit = d.Limit
		}
		cfg := ScaleConfig(d.Config, limit, d.Limit)
		put := level
		changed, err := r.put(ctx, d, func(read bucket.Config) bucket.Config {
			if level > 0 {
				put = max(level, cutLevelOf(d, read))
			}
			return withBurst(d, cfg, put)
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("vendors: setting %s's burst: %w", d.Name, err))
			continue
		}
		r.mu.Lock()
		r.cut[d.Name] = level
		r.cutPut[d.Name] = now
		r.mu.Unlock()
		if changed {
			done = append(done, d.Name)
			if put > 0 {
				r.client.Logger().LogAttrs(ctx, slog.LevelInfo, "vendors.burst_cut", slog.String("dimension", d.Name),
					slog.Int("level", put), slog.Duration("for", quantizedFor*d.Window))
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

// cutLevelOf returns the level at which c, a configuration the Reactor
// produces for d, has its burst cut: 0 when it is not cut (a capacity of
// one the scaling alone gives is not a cut).
func cutLevelOf(d Dimension, c bucket.Config) int {
	if !cuttable(d) || c.Capacity != 1 || scaled(d, c) {
		return 0
	}
	level, _ := cutFollowed(d, c)
	return level
}
