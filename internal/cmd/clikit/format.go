package clikit

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// Itoa formats n in decimal.
func Itoa(n int64) string { return strconv.FormatInt(n, 10) }

// FormatFloat formats f with prec decimals.
func FormatFloat(f float64, prec int) string { return strconv.FormatFloat(f, 'f', prec, 64) }

// PeriodString names a refill period: 1m, 1s, 1h, or a Go duration.
func PeriodString(p time.Duration) string {
	switch p {
	case 0:
		return "-"
	case time.Second:
		return "1s"
	case time.Minute:
		return "1m"
	case time.Hour:
		return "1h"
	case 24 * time.Hour:
		return "24h"
	}
	return p.String()
}

// RateString describes a bucket's limit: "500/1m", "500/1m burst 600",
// "5 concurrent".
func RateString(c bucket.Config) string {
	if c.Type == bucket.Concurrent {
		return Itoa(c.Capacity) + " concurrent"
	}
	s := Itoa(c.RefillAmount) + "/" + PeriodString(c.RefillPeriod)
	if c.Capacity != c.RefillAmount {
		s += " burst " + Itoa(c.Capacity)
	}
	return s
}

// LimitString describes a bucket's limit and type, naming the type once:
// "500/1m requests", "30000/1m burst 40000 tokens", "5 concurrent".
func LimitString(c bucket.Config) string {
	if c.Type == bucket.Concurrent {
		return RateString(c)
	}
	return RateString(c) + " " + c.Type.String()
}

// ParseItems parses DIM[:COST] arguments; the cost is after the last
// colon, so a dimension whose name has a colon needs an explicit cost.
func ParseItems(args []string) ([]store.Item, error) {
	its := make([]store.Item, 0, len(args))
	for _, a := range args {
		it := store.Item{Dimension: a}
		if i := strings.LastIndexByte(a, ':'); i >= 0 {
			n, err := strconv.ParseInt(a[i+1:], 10, 64)
			if !digits(a[i+1:]) || err != nil || n < 1 {
				return nil, Usagef("%q: the cost after ':' must be a whole number of tokens, at least 1 (DIMENSION[:COST])", a)
			}
			if n > bucket.MaxCapacity {
				return nil, Usagef("%q: cost %q: must be between 1 and 10^12 tokens (DIMENSION[:COST])", a, a[i+1:])
			}
			it = store.Item{Dimension: a[:i], Cost: n}
		}
		if err := contract.Name(it.Dimension); err != nil {
			return nil, &UsageError{Err: err}
		}
		its = append(its, it)
	}
	return its, nil
}

// digits reports whether s is a non-empty run of ASCII digits or starts
// with a sign (so that "x:-5" is rejected as a cost, not taken as a name).
func digits(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if (r < '0' || r > '9') && !(i == 0 && (r == '-' || r == '+')) {
			return false
		}
	}
	return true
}

// SleepCtx sleeps for d, or until ctx is done: then it returns ctx's cause.
func SleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
