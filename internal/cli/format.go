package cli

import (
	"strconv"
	"time"

	"github.com/ontopix/sluice/bucket"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func formatFloat(f float64, prec int) string { return strconv.FormatFloat(f, 'f', prec, 64) }

// periodString names a refill period: 1m, 1s, 1h, or a Go duration.
func periodString(p time.Duration) string {
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

// rateString describes a bucket's limit: "500/1m", "500/1m burst 600",
// "5 concurrent".
func rateString(c bucket.Config) string {
	if c.Type == bucket.Concurrent {
		return itoa(c.Capacity) + " concurrent"
	}
	s := itoa(c.RefillAmount) + "/" + periodString(c.RefillPeriod)
	if c.Capacity != c.RefillAmount {
		s += " burst " + itoa(c.Capacity)
	}
	return s
}

// limitString describes a bucket's limit and type, naming the type once:
// "500/1m requests", "30000/1m burst 40000 tokens", "5 concurrent".
func limitString(c bucket.Config) string {
	if c.Type == bucket.Concurrent {
		return rateString(c)
	}
	return rateString(c) + " " + c.Type.String()
}
