package vendorsim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// DistKind is the shape of a Dist.
type DistKind string

// The distribution shapes.
const (
	// KindFixed always draws A.
	KindFixed DistKind = "fixed"
	// KindUniform draws uniformly from [A, B].
	KindUniform DistKind = "uniform"
	// KindLogNormal draws a log-normal value with median A and shape
	// Sigma B (the standard deviation of its logarithm).
	KindLogNormal DistKind = "lognormal"
)

// Dist is a distribution of non-negative values: seconds for latency,
// tokens for lengths. The zero value always draws 0.
type Dist struct {
	Kind DistKind // "" means KindFixed
	A, B float64
}

// Fixed returns a Dist that always draws v.
func Fixed(v float64) Dist { return Dist{Kind: KindFixed, A: v} }

// Uniform returns a Dist drawing uniformly from [lo, hi].
func Uniform(lo, hi float64) Dist { return Dist{Kind: KindUniform, A: lo, B: hi} }

// LogNormal returns a Dist drawing log-normal values with the given median
// and sigma (the standard deviation of the logarithm).
func LogNormal(median, sigma float64) Dist { return Dist{Kind: KindLogNormal, A: median, B: sigma} }

// FixedDuration returns a latency Dist that always draws d.
func FixedDuration(d time.Duration) Dist { return Fixed(d.Seconds()) }

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func (d Dist) validate(field string) error {
	const big = 1e9
	switch d.Kind {
	case "", KindFixed:
		if !(finite(d.A) && d.A >= 0 && d.A <= big) {
			return &FieldError{field + ".A", d.A, "must be between 0 and 10^9"}
		}
	case KindUniform:
		if !(finite(d.A) && d.A >= 0 && d.A <= big) {
			return &FieldError{field + ".A", d.A, "must be between 0 and 10^9"}
		}
		if !(finite(d.B) && d.B >= d.A && d.B <= big) {
			return &FieldError{field + ".B", d.B, "must be between A and 10^9"}
		}
	case KindLogNormal:
		if !(finite(d.A) && d.A >= 0 && d.A <= big) {
			return &FieldError{field + ".A", d.A, "the median must be between 0 and 10^9"}
		}
		if !(finite(d.B) && d.B >= 0 && d.B <= 10) {
			return &FieldError{field + ".B", d.B, "sigma must be between 0 and 10"}
		}
	default:
		return &FieldError{field + ".Kind", d.Kind, "must be fixed, uniform or lognormal"}
	}
	return nil
}

// sample draws one value, never negative and never above 10^12.
func (d Dist) sample(r *rand.Rand) float64 {
	var v float64
	switch d.Kind {
	case KindUniform:
		v = d.A + (d.B-d.A)*r.Float64()
	case KindLogNormal:
		v = d.A * math.Exp(d.B*r.NormFloat64())
	default:
		v = d.A
	}
	return min(max(v, 0), 1e12)
}

// zero reports whether d always draws 0.
func (d Dist) zero() bool {
	return (d.Kind == "" || d.Kind == KindFixed || d.Kind == KindUniform) && d.A == 0 && d.B == 0 ||
		d.Kind == KindLogNormal && d.A == 0
}

// String formats d as ParseDist reads it.
func (d Dist) String() string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	switch d.Kind {
	case KindUniform:
		return "uniform:" + f(d.A) + "," + f(d.B)
	case KindLogNormal:
		return "lognormal:" + f(d.A) + "," + f(d.B)
	}
	return "fixed:" + f(d.A)
}

// ParseDist reads a distribution of numbers: "N" or "fixed:N",
// "uniform:LO,HI", "lognormal:MEDIAN,SIGMA".
func ParseDist(s string) (Dist, error) {
	return parseDist(s, func(v string) (float64, error) { return strconv.ParseFloat(v, 64) })
}

// ParseLatency reads a distribution of durations as ParseDist does, with
// Go durations for the values ("200ms", "uniform:50ms,300ms",
// "lognormal:200ms,0.5": sigma stays a number). The Dist is in seconds.
func ParseLatency(s string) (Dist, error) {
	return parseDist(s, func(v string) (float64, error) {
		d, err := time.ParseDuration(v)
		return d.Seconds(), err
	})
}

func parseDist(s string, value func(string) (float64, error)) (Dist, error) {
	kind, args, found := strings.Cut(s, ":")
	if !found {
		kind, args = string(KindFixed), s
	}
	parts := strings.Split(args, ",")
	bad := func(reason string) (Dist, error) {
		return Dist{}, fmt.Errorf("distribution %q: %s: %w", s, reason, ErrConfig)
	}
	var d Dist
	switch DistKind(kind) {
	case KindFixed:
		if len(parts) != 1 {
			return bad("fixed takes one value")
		}
		v, err := value(parts[0])
		if err != nil {
			return bad(err.Error())
		}
		d = Fixed(v)
	case KindUniform, KindLogNormal:
		if len(parts) != 2 {
			return bad(kind + " takes two values")
		}
		a, err := value(parts[0])
		if err != nil {
			return bad(err.Error())
		}
		var b float64
		if DistKind(kind) == KindLogNormal {
			b, err = strconv.ParseFloat(parts[1], 64)
		} else {
			b, err = value(parts[1])
		}
		if err != nil {
			return bad(err.Error())
		}
		d = Dist{Kind: DistKind(kind), A: a, B: b}
	default:
		return bad("the kind must be fixed, uniform or lognormal")
	}
	if err := d.validate("distribution"); err != nil {
		return bad(err.Error())
	}
	return d, nil
}
