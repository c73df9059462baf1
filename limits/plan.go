package limits

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/vendors"
)

// Action is what applying a file does to one bucket.
type Action string

// The actions of a plan.
const (
	Create    Action = "create"
	Update    Action = "update"
	Reset     Action = "reset" // unchanged configuration, refilled (--reset)
	Unchanged Action = "unchanged"
	Delete    Action = "delete"    // in the store, not in the file, with prune
	Unmanaged Action = "unmanaged" // in the store, not in the file, kept
)

// FieldChange is one configuration field that differs.
type FieldChange struct {
	Field string `json:"field"`
	From  string `json:"from,omitempty"`
	To    string `json:"to"`
}

// Change is one bucket's line in a plan.
type Change struct {
	Action    Action        `json:"action"`
	Dimension string        `json:"dimension"`
	Source    string        `json:"source,omitempty"`
	Line      int           `json:"line,omitempty"`
	Fields    []FieldChange `json:"fields,omitempty"`
	// Bucket is the configuration to write (create, update, reset) or the
	// one in the store (delete, unmanaged).
	Bucket store.Bucket `json:"-"`
	// Reset reports that applying fills the bucket to capacity.
	Reset bool `json:"reset"`
	// Tokens is the live balance in millitokens, for existing buckets.
	Tokens *int64 `json:"tokens_milli,omitempty"`
	// read is the configuration the plan read from the store, for
	// existing buckets: Apply writes only if it is still the same.
	read bucket.Config
}

// Changes reports whether applying would write anything.
func (c Change) Changes() bool { return c.Action != Unchanged && c.Action != Unmanaged }

// Plan compares the file with the store's buckets. With reset every
// declared bucket is refilled; with prune, buckets the file does not
// declare are deleted. The changes are sorted by dimension.
func Plan(f *File, current []store.BucketState, reset, prune bool) []Change {
	cur := make(map[string]store.BucketState, len(current))
	for _, s := range current {
		cur[s.Name] = s
	}
	declared := map[string]bool{}
	var out []Change
	for _, e := range f.Entries {
		declared[e.Name] = true
		c := Change{Dimension: e.Name, Source: e.Source, Line: e.Line, Bucket: e.Bucket, Reset: reset}
		s, ok := cur[e.Name]
		switch {
		case !ok:
			c.Action, c.Reset = Create, true
			c.Fields = diff(bucket.Config{}, e.Config, true)
		default:
			tokens := s.Tokens
			c.Tokens, c.read = &tokens, s.Config
			c.Fields = diff(s.Config, e.Config, false)
			switch {
			case len(c.Fields) > 0:
				c.Action = Update
			case reset:
				c.Action = Reset
			default:
				c.Action = Unchanged
			}
		}
		out = append(out, c)
	}
	for _, s := range current {
		if declared[s.Name] {
			continue
		}
		tokens := s.Tokens
		c := Change{Action: Unmanaged, Dimension: s.Name, Bucket: s.Bucket, Tokens: &tokens}
		if prune {
			c.Action = Delete
		}
		out = append(out, c)
	}
	sortChanges(out)
	return out
}

func sortChanges(cs []Change) {
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && cs[j].Dimension < cs[j-1].Dimension; j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

// diff lists the effective configuration fields that differ between a
// and b (all of b's when create is set).
func diff(a, b bucket.Config, create bool) []FieldChange {
	type f struct {
		name   string
		av, bv string
	}
	period := func(c bucket.Config) string {
		if c.Type == bucket.Concurrent || c.RefillPeriod == 0 {
			return "-"
		}
		return Period(c.RefillPeriod)
	}
	refill := func(c bucket.Config) string {
		if c.Type == bucket.Concurrent {
			return "-"
		}
		return strconv.FormatInt(c.RefillAmount, 10)
	}
	i := func(n int64) string { return strconv.FormatInt(n, 10) }
	typ := func(c bucket.Config) string {
		if c.Type == 0 {
			return "-"
		}
		return c.Type.String()
	}
	fields := []f{
		{"type", typ(a), typ(b)},
		{"capacity", i(a.Capacity), i(b.Capacity)},
		{"refill", refill(a), refill(b)},
		{"per", period(a), period(b)},
		{"cost_per_call", i(a.Cost()), i(b.Cost())},
		{"max_debt", debt(a), debt(b)},
	}
	var out []FieldChange
	for _, x := range fields {
		if create {
			if x.bv != "-" {
				out = append(out, FieldChange{Field: x.name, To: x.bv})
			}
			continue
		}
		if x.av != x.bv {
			out = append(out, FieldChange{Field: x.name, From: x.av, To: x.bv})
		}
	}
	return out
}

// Summary counts a plan's actions: "2 to create, 1 to update, …".
func Summary(cs []Change) string {
	n := map[Action]int{}
	for _, c := range cs {
		n[c.Action]++
	}
	return fmt.Sprintf("%d to create, %d to update, %d to reset, %d to delete, %d unchanged, %d unmanaged",
		n[Create], n[Update], n[Reset], n[Delete], n[Unchanged], n[Unmanaged])
}

func debt(c bucket.Config) string {
	if c.Type == bucket.Concurrent || c.Type == 0 {
		return "-"
	}
	return strconv.FormatInt(c.Debt(), 10)
}

// Period formats a refill period as a file would write it: 1s, 1m, 1h,
// 1d, else a Go duration.
func Period(d time.Duration) string {
	switch d {
	case time.Second:
		return "1s"
	case time.Minute:
		return "1m"
	case time.Hour:
		return "1h"
	case 24 * time.Hour:
		return "1d"
	}
	return d.String()
}

// metered are the vendors whose calls vendors/transport meters by model
// (or Azure deployment).
var metered = map[vendors.Vendor]string{vendors.OpenAI: "models", vendors.Anthropic: "models",
	vendors.Groq: "models", vendors.Azure: "deployments"}

// Unmetered returns a warning for each vendor metered by vendors/transport
// (OpenAI, Anthropic, Groq, Azure OpenAI) whose presets are all scoped to
// models (or deployments): calls to its other models match no preset, and
// the transport refuses them unless configured otherwise. Each warning
// names the vendor, the models covered and the fixes. The warnings are in
// the order of the vendors' first presets.
func Unmetered(f *File) []string {
	scopes := map[vendors.Vendor][]string{}
	unscoped := map[vendors.Vendor]bool{}
	var order []vendors.Vendor
	for _, p := range f.profiles {
		if _, seen := scopes[p.Vendor]; !seen && !unscoped[p.Vendor] {
			order = append(order, p.Vendor)
		}
		if p.Scope == "" {
			unscoped[p.Vendor] = true
			continue
		}
		scopes[p.Vendor] = append(scopes[p.Vendor], p.Scope)
	}
	var out []string
	for _, v := range order {
		what, ok := metered[v]
		if unscoped[v] || !ok {
			continue
		}
		out = append(out, fmt.Sprintf("%s: presets cover only %s; calls to its other %s match no preset "+
			"and vendors/transport refuses them: add an unscoped %s preset, or configure transport.WithModelAliases or transport.WithFallbackProfile",
			v, strings.Join(scopes[v], ", "), what, v))
	}
	return out
}
