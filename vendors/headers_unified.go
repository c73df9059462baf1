package vendors

import (
	"sort"
	"strings"
)

const unifiedPrefix = "anthropic-ratelimit-unified-"

// maxUnifiedWindows bounds how many unified windows one response may add.
const maxUnifiedWindows = 16

// unified reads the anthropic-ratelimit-unified-* headers: the overall status,
// reset (epoch seconds), representative claim and fallback percentage, and
// for each window W (e.g. "5h", "7d") W-status, W-reset and W-utilization.
// Other unified headers are ignored.
func (p *headerParser) unified() {
	var names []string
	for k, vs := range p.h {
		if len(vs) > 0 && len(k) > len(unifiedPrefix) && strings.EqualFold(k[:len(unifiedPrefix)], unifiedPrefix) {
			names = append(names, k)
		}
	}
	sort.Strings(names) // Problems come out in a stable order.
	u := &p.s.Unified
	for _, k := range names {
		name := strings.ToLower(k)
		v := strings.TrimSpace(p.h[k][0])
		if v == "" {
			continue
		}
		switch rest := name[len(unifiedPrefix):]; rest {
		case "status":
			u.Status = p.word(name, v)
		case "reset":
			u.Reset = p.epochReset(name, v)
		case "representative-claim":
			u.RepresentativeClaim = p.word(name, v)
		case "fallback-percentage":
			u.FallbackPercentage = p.fraction(name, v)
		default:
			p.unifiedWindow(u, name, rest, v)
		}
	}
}

// unifiedWindow reads one W-status, W-reset or W-utilization header.
func (p *headerParser) unifiedWindow(u *UnifiedSignals, name, rest, v string) {
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 {
		return
	}
	window, field := rest[:i], rest[i+1:]
	if field != "status" && field != "reset" && field != "utilization" {
		return
	}
	w, seen := u.Windows[window]
	if !seen && len(u.Windows) >= maxUnifiedWindows {
		p.problem(name, v, "too many unified windows; ignored")
		return
	}
	switch field {
	case "status":
		w.Status = p.word(name, v)
	case "reset":
		w.Reset = p.epochReset(name, v)
	case "utilization":
		w.Utilization = p.fraction(name, v)
	}
	if u.Windows == nil {
		u.Windows = make(map[string]UnifiedWindow, 2)
	}
	u.Windows[window] = w
}

func (p *headerParser) epochReset(name, v string) Instant {
	at, reason := parseReset(ResetEpochSeconds, v, p.now)
	if reason != "" {
		if reason != reasonPassed {
			p.problem(name, v, reason)
		}
		return Instant{}
	}
	return Instant{At: at, Known: true, Header: name}
}

// fraction reads a number in [0, 1].
func (p *headerParser) fraction(name, v string) Fraction {
	n, reason := parseDecimal(v)
	if reason == "" && (n < 0 || n > 1) {
		reason = "not a fraction in [0, 1]"
	}
	if reason != "" {
		p.problem(name, v, reason)
		return Fraction{}
	}
	return Fraction{Value: n, Known: true, Header: name}
}

// word accepts a short lower-case status word such as "allowed_warning".
func (p *headerParser) word(name, v string) string {
	ok := len(v) <= 64
	for i := 0; ok && i < len(v); i++ {
		c := v[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
	}
	if !ok {
		p.problem(name, v, "not a status word such as allowed or rejected")
		return ""
	}
	return v
}
