package verify

import (
	"fmt"
	"strings"

	"github.com/ontopix/sluice/bucket"
)

// Exceeded describes the dimensions whose verdict failed, for a message.
func (r *Report) Exceeded() string {
	var parts []string
	for _, d := range r.Dimensions {
		if d.OK() {
			continue
		}
		s := fmt.Sprintf("%s by %s %s between %s and %s", d.Name, Margin(-d.WorstExcess), Unit(d.Config.Type),
			d.WorstFrom.Format("15:04:05.000"), d.WorstTo.Format("15:04:05.000"))
		if len(d.Problems) > 0 {
			s += " (" + strings.Join(d.Problems, "; ") + ")"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "the workers saw more slots in flight than the limit"
	}
	return strings.Join(parts, "; ")
}

// Margin formats a dimension's margin below its limit, −excess
// millitokens, as tokens (decimals only when needed).
func Margin(excess int64) string {
	m := -excess
	if m%bucket.Milli == 0 {
		return fmt.Sprint(m / bucket.Milli)
	}
	return fmt.Sprintf("%.3f", float64(m)/bucket.Milli)
}

// Unit is the unit of a limit type in tables and messages: req, tok or
// slots.
func Unit(t bucket.LimitType) string {
	switch t {
	case bucket.Requests:
		return "req"
	case bucket.Tokens:
		return "tok"
	}
	return "slots"
}
