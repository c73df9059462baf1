package console

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/history"
)

// row is one dimension of the overview, formatted for display.
type row struct {
	Name, Path, Type, Limit string
	// Level is the balance in tokens against Capacity; FillPct is it in
	// percent of the capacity (0 while in debt).
	Level    string
	Capacity int64
	FillPct  float64
	// Debt is the tokens owed below zero, "" when none.
	Debt string
	// Queue is the line: callers waiting for a concurrent bucket's slots,
	// or how long until a rate bucket's reservations are all valid; ""
	// when there is none.
	Queue  string
	Leases int
	// Cooldown is the time left in a running cooldown, "" when none.
	Cooldown string
	// Live reports that the columns below come from a history.
	Live                bool
	Grants, Refusals    int64
	WaitP95             string
	R429Req, R429Tok    int64
	R429Other           int64
	Drift               string
	DriftWarn, Refusing bool
}

// overviewData is the overview's content: rows, or the reason there are
// none.
type overviewData struct {
	At    time.Time
	Rows  []row
	Err   string
	Hist  bool
	Total struct{ Leases, Cooling, InDebt int }
}

// snapshot reads every bucket once and builds the overview.
func (h *handler) snapshot(ctx context.Context) overviewData {
	d := overviewData{At: h.now(), Hist: h.hist != nil}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	states, err := h.c.Buckets(ctx)
	if err != nil {
		d.Err = redact(err.Error())
		h.log.Warn("console.read_failed", "error", d.Err)
		return d
	}
	d.Rows = make([]row, len(states))
	for i, s := range states {
		var live *history.Counts
		if h.hist != nil {
			c := h.hist.Live(s.Name)
			live = &c
		}
		d.Rows[i] = rowOf(s, live)
		d.Total.Leases += s.ActiveLeases
		if d.Rows[i].Cooldown != "" {
			d.Total.Cooling++
		}
		if d.Rows[i].Debt != "" {
			d.Total.InDebt++
		}
	}
	return d
}

// rowOf formats one bucket's state and, when live is not nil, its last
// minute in this process.
func rowOf(s sluice.BucketState, live *history.Counts) row {
	r := row{Name: s.Name, Path: "d/" + url.PathEscape(s.Name), Type: s.Type.String(), Limit: rate(s.Config),
		Level: s.Tokens.String(), Capacity: s.Capacity, Leases: s.ActiveLeases}
	if s.Tokens > 0 && s.Capacity > 0 {
		r.FillPct = math.Round(float64(s.Tokens)/float64(s.Capacity)) / 10
	}
	if s.Tokens < 0 {
		r.Debt = (-s.Tokens).String()
	}
	if s.CoolingDown() {
		r.Cooldown = dur(s.CooldownUntil.Sub(s.Now))
	}
	r.Queue = queue(s)
	if live == nil {
		return r
	}
	r.Live = true
	r.Grants, r.Refusals = live.Grants, live.Refusals
	r.Refusing = live.Refusals > 0
	r.WaitP95 = p95(live.WaitHist)
	r.R429Req, r.R429Tok, r.R429Other = live.Responses["429_requests"], live.Responses["429_tokens"], live.Responses["429_other"]
	if live.MinRemaining >= 0 && s.Type != bucket.Concurrent {
		drift := s.Tokens.Tokens() - float64(live.MinRemaining)
		r.Drift = strconv.FormatFloat(drift, 'f', 0, 64)
		if drift > 0 {
			r.Drift = "+" + r.Drift
		}
		r.DriftWarn = math.Abs(drift) > float64(s.Capacity)/10
	}
	return r
}

// queue describes a bucket's line: "3 waiting" for a concurrent bucket,
// "2.5s" until a rate bucket's last reservation is valid; "" when none.
func queue(s sluice.BucketState) string {
	if s.Type == bucket.Concurrent {
		if s.Waiters > 0 {
			return fmt.Sprintf("%d waiting", s.Waiters)
		}
		return ""
	}
	if s.ReservedUntil.After(s.Now) {
		return dur(s.ReservedUntil.Sub(s.Now))
	}
	return ""
}

// p95 is the 95th percentile of a wait histogram over waitBounds, as the
// upper bound of its bucket; "" when the histogram is empty.
func p95(hist []int64) string {
	var n int64
	for _, c := range hist {
		n += c
	}
	if n == 0 {
		return ""
	}
	want := (n*95 + 99) / 100
	var cum int64
	for i, c := range hist {
		cum += c
		if cum >= want {
			if i < len(waitBounds) {
				return "≤" + dur(waitBounds[i])
			}
			break
		}
	}
	return ">" + dur(waitBounds[len(waitBounds)-1])
}

// rate formats a bucket's limit, e.g. "60/1m", "5 concurrent".
func rate(c bucket.Config) string {
	if c.Type == bucket.Concurrent {
		return fmt.Sprintf("%d concurrent", c.Capacity)
	}
	p := c.RefillPeriod.String()
	if strings.HasSuffix(p, "m0s") {
		p = p[:len(p)-2]
	}
	if strings.HasSuffix(p, "h0m") {
		p = p[:len(p)-2]
	}
	r := fmt.Sprintf("%d/%s", c.RefillAmount, p)
	if c.Capacity != c.RefillAmount {
		r += fmt.Sprintf(" burst %d", c.Capacity)
	}
	return r
}

// dur formats d compactly: "850ms", "12s", "1m30s", "2h0m".
func dur(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + dur(-d)
	case d < time.Second:
		return d.Truncate(time.Millisecond).String()
	case d < time.Minute:
		return d.Truncate(100 * time.Millisecond).String()
	}
	s := d.Truncate(time.Second).String()
	if d >= time.Hour {
		s = d.Truncate(time.Minute).String()
	}
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2] // "1m0s" -> "1m", "2h5m0s" -> "2h5m"
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2] // "2h0m" -> "2h"
	}
	return s
}

var (
	userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://)[^/\s]*@`) // up to the authority's last @: a password may hold one
	secretKV = regexp.MustCompile(`(?i)((?:password|passwd|pwd|token|secret|key|sig|signature|credential)[A-Za-z_\-]*=)[^&\s"']+`)
	bearer   = regexp.MustCompile(`(?i)(bearer\s+)\S+`)
)

// redact removes what may be a secret from a message before it is shown:
// the user information of URLs, the values of password-like query
// parameters and bearer tokens.
func redact(s string) string {
	s = userinfo.ReplaceAllString(s, "${1}REDACTED@")
	s = secretKV.ReplaceAllString(s, "${1}REDACTED")
	return bearer.ReplaceAllString(s, "${1}REDACTED")
}
