// Package limits reads the declarative limits file of `sluice limits
// apply`, plans the changes that bring a store's buckets in line with it,
// and applies them, so that a service can apply the same file as the CLI:
//
//	f, err := limits.Load("limits.yaml")
//	if err != nil {
//		return err // a *limits.Error per problem, each with file:line:column
//	}
//	changes, err := limits.Apply(ctx, client, f)
//
// Apply creates missing buckets and reconfigures changed ones, keeping
// their live balances; it never refills a bucket unless asked (WithReset).
// In a fleet every process may apply the same file at start-up, even at the
// same moment: each write is conditional on what Apply read, so that is
// idempotent and leaves the shared balances alone. NewClient builds the
// Client from the file as well, so that it re-creates a bucket the store
// lost (a store restarted empty) and, failing open, starts while the store
// is down:
//
//	cfg := sluice.DefaultConfig()
//	cfg.FailurePolicy = sluice.FailOpen
//	client, err := limits.NewClient(ctx, st, f, sluice.WithConfig(cfg))
//
// Do not call Client.PutBucket with sluice.ResetTokens (or Apply WithReset)
// at start-up: each process starting, restarting or scaling out would refill
// the buckets to capacity, granting a whole burst again on every deploy;
// reset is an operator's action (sluice limits apply --reset, sluice bucket
// reset).
//
// A file declares dimensions one by one, or through presets built from the
// vendor profiles of package vendors, whose buckets never admit more than
// the vendor's own rule (a requests bucket holds one second's worth, every
// rate is kept 2 % below the vendor's by default):
//
//	dimensions:
//	  openai#gpt-4o#rpm:
//	    type: requests      # requests | tokens | concurrent
//	    capacity: 500       # the burst; slots for concurrent
//	    per: 1m             # refill period: 1s, 1m, 1h, 1d or a duration
//	    refill: 500         # tokens per period (default: capacity)
//	    cost_per_call: 1    # default cost (default 1)
//	    max_debt: 0         # tokens one settlement may add to the debt (0: capacity, -1: no debt)
//	presets:
//	  - preset: openai      # <vendor>[#<model>]#rpm, #tpm, #rpd, #tpd
//	    model: gpt-4o-mini
//	    rpm: 500
//	    tpm: 200000
//	    headroom: 5%        # or 0.05; 0 to 50 %, default 2 %
//	    request_margin: 50ms # arrival jitter the requests bucket absorbs (0s to 10s)
//	    cost_reading: admission_kept # or adjusted_to_usage, or {tpm: adjusted_to_usage}
//	    burst: {rpm: 4}     # a smaller capacity than the profile's
//	  - preset: anthropic   # #rpm, #input_tpm, #output_tpm
//	    rpm: 50
//	    input_tpm: 40000
//	    output_tpm: 8000
//	  - preset: azure       # azure#<deployment>#rpm, #tpm (rpm: 6 per 1000 tpm)
//	    deployment: gpt-4o-eu
//	    tpm: 30000
//	  - preset: gemini      # #rpm, #tpm (input), #rpd
//	    rpm: 10
//	  - preset: groq        # #rpm, #tpm, #input_tpm, #output_tpm, #rpd, #tpd
//	    tpm: 6000
//	  - preset: elevenlabs  # #concurrent, or <family>#concurrent from a plan
//	    plan: creator
//	    family: flash_turbo
//
// Every error names the file, line, column and field.
package limits

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/vendors"
)

// Error is a problem at a position in the file.
type Error struct {
	File         string
	Line, Column int
	// Field is the path of the offending field, e.g.
	// dimensions["openai#rpm"].capacity or presets[1].rpm.
	Field string
	Msg   string
}

// Error implements error as file:line:column: field: message.
func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s: %s", e.File, e.Line, e.Column, e.Field, e.Msg)
}

// Entry is one bucket the file declares.
type Entry struct {
	store.Bucket
	// Source says where it was declared: "dimensions" or "preset openai".
	Source string
	// Line is the line of its declaration.
	Line int
}

// File is a parsed limits file, its buckets sorted by name.
type File struct {
	Name    string
	Entries []Entry

	profiles []vendors.Profile // one per preset, in file order
}

// Buckets returns the declared buckets.
func (f *File) Buckets() []store.Bucket {
	out := make([]store.Bucket, len(f.Entries))
	for i, e := range f.Entries {
		out[i] = e.Bucket
	}
	return out
}

// Load reads and parses a file.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, b)
}

// parser collects errors with positions.
type parser struct {
	file string
	errs []error
	seen map[string]*yaml.Node // dimension → where it was declared
	out  []Entry
	prof []vendors.Profile
}

func (p *parser) errorf(n *yaml.Node, field, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Line: n.Line, Column: n.Column, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// Parse parses the contents of a file named name. All problems are
// reported, joined, each as an *Error.
func Parse(name string, data []byte) (*File, error) {
	p := &parser{file: name, seen: map[string]*yaml.Node{}}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	// A file of comments has no document; one of "---" (or "~") has a
	// null one, which yaml places past the end of the file.
	if len(doc.Content) == 0 || doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].Tag == "!!null" {
		return nil, &Error{File: name, Line: 1, Column: 1, Msg: "the file is empty; declare dimensions: or presets:"}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, &Error{File: name, Line: root.Line, Column: root.Column, Msg: "must be a mapping with dimensions: and/or presets:"}
	}
	p.duplicates(root, "")
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "version":
			if v.Value != "1" {
				p.errorf(v, "version", "must be 1")
			}
		case "dimensions":
			p.dimensions(v)
		case "presets":
			p.presets(v)
		default:
			p.errorf(k, k.Value, "unknown key (want version, dimensions or presets)")
		}
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	sort.Slice(p.out, func(i, j int) bool { return p.out[i].Name < p.out[j].Name })
	return &File{Name: name, Entries: p.out, profiles: p.prof}, nil
}

func (p *parser) dimensions(n *yaml.Node) {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "dimensions", "must be a mapping of dimension name to its limit")
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		path := fmt.Sprintf("dimensions[%q]", k.Value)
		if v.Kind != yaml.MappingNode {
			p.errorf(v, path, "must be a mapping with type, capacity, per, …")
			continue
		}
		fields := map[string]*yaml.Node{}
		for j := 0; j+1 < len(v.Content); j += 2 {
			fk, fv := v.Content[j], v.Content[j+1]
			switch fk.Value {
			case "type", "capacity", "per", "refill", "cost_per_call", "max_debt":
				fields[fk.Value] = fv
			default:
				p.errorf(fk, path+"."+fk.Value, "unknown field (want type, capacity, per, refill, cost_per_call, max_debt)")
			}
		}
		c, ok := p.config(path, v, fields)
		if ok {
			p.add(k, path, Entry{Bucket: store.Bucket{Name: k.Value, Config: c}, Source: "dimensions", Line: k.Line}, fields)
		}
	}
}

// duplicates reports every key given twice in a mapping of n, at any
// depth: the parser reads the last one, so a key repeated by a botched
// merge would otherwise change a limit unseen. path names n.
func (p *parser) duplicates(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p.duplicates(c, fmt.Sprintf("%s[%d]", path, i))
		}
	case yaml.MappingNode:
		first := map[string]*yaml.Node{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			kp := path + "." + k.Value
			switch {
			case path == "":
				kp = k.Value
			case path == "dimensions":
				kp = fmt.Sprintf("dimensions[%q]", k.Value)
			}
			if prev, dup := first[k.Value]; dup {
				p.errorf(k, kp, "given twice (first at line %d)", prev.Line)
			} else {
				first[k.Value] = k
			}
			p.duplicates(v, kp)
		}
	}
}

// config builds a bucket config from a dimension's fields.
func (p *parser) config(path string, at *yaml.Node, f map[string]*yaml.Node) (bucket.Config, bool) {
	var c bucket.Config
	ok := true
	tn := f["type"]
	if tn == nil {
		p.errorf(at, path+".type", "missing: requests, tokens or concurrent")
		return c, false
	}
	t, err := bucket.ParseType(tn.Value)
	if err != nil {
		p.errorf(tn, path+".type", "%q: must be requests, tokens or concurrent", tn.Value)
		return c, false
	}
	c.Type = t
	num := func(name string, dst *int64) {
		n := f[name]
		if n == nil {
			return
		}
		v, err := intOf(n)
		if err != nil {
			p.errorf(n, path+"."+name, "%v", err)
			ok = false
			return
		}
		*dst = v
	}
	if f["capacity"] == nil {
		p.errorf(at, path+".capacity", "missing")
		ok = false
	}
	num("capacity", &c.Capacity)
	num("cost_per_call", &c.CostPerCall)
	num("max_debt", &c.MaxDebt)
	if t == bucket.Concurrent {
		for _, name := range []string{"per", "refill"} {
			if n := f[name]; n != nil {
				p.errorf(n, path+"."+name, "a concurrent dimension does not refill; remove it")
				ok = false
			}
		}
	} else {
		num("refill", &c.RefillAmount)
		if n := f["per"]; n == nil {
			p.errorf(at, path+".per", "missing: the refill period, e.g. 1m")
			ok = false
		} else if d, err := ParsePeriod(n.Value); err != nil {
			p.errorf(n, path+".per", "%q: %v", n.Value, err)
			ok = false
		} else {
			c.RefillPeriod = d
		}
		if f["refill"] == nil { // given as 0, Validate refuses it
			c.RefillAmount = c.Capacity
		}
	}
	if !ok {
		return c, false
	}
	if err := c.Validate(); err != nil {
		var fe *bucket.FieldError
		if errors.As(err, &fe) {
			name := yamlField(fe.Field)
			n := f[name]
			if n == nil {
				n = at
			}
			p.errorf(n, path+"."+name, "%v: %s", fe.Value, fe.Reason)
		} else {
			p.errorf(at, path, "%v", err)
		}
		return c, false
	}
	return c, true
}

// yamlField maps a bucket.FieldError field to the file's key.
func yamlField(f string) string {
	switch f {
	case "limit_type":
		return "type"
	case "refill_amount":
		return "refill"
	case "refill_period":
		return "per"
	}
	return f
}

// add records an entry, rejecting invalid names and duplicates.
func (p *parser) add(at *yaml.Node, path string, e Entry, _ map[string]*yaml.Node) {
	if err := contract.Name(e.Name); err != nil {
		var fe *bucket.FieldError
		msg := err.Error()
		if errors.As(err, &fe) {
			msg = fe.Reason
		}
		p.errorf(at, path, "invalid dimension name: %s", msg)
		return
	}
	if prev, dup := p.seen[e.Name]; dup {
		p.errorf(at, path, "dimension %q is already declared at line %d", e.Name, prev.Line)
		return
	}
	p.seen[e.Name] = at
	p.out = append(p.out, e)
}

// intOf reads a whole number (underscores allowed: 30_000).
func intOf(n *yaml.Node) (int64, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, fmt.Errorf("must be a whole number")
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: must be a whole number", n.Value)
	}
	return v, nil
}

// ParsePeriod accepts 1s, 1m, 1h, 1d, second, minute, hour, day or a Go
// duration of whole milliseconds.
func ParsePeriod(s string) (time.Duration, error) {
	switch s {
	case "second", "sec", "s":
		return time.Second, nil
	case "minute", "min", "m":
		return time.Minute, nil
	case "hour", "h":
		return time.Hour, nil
	case "day", "d", "1d":
		return 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Millisecond || d%time.Millisecond != 0 {
		return 0, fmt.Errorf("must be 1s, 1m, 1h, 1d or a duration of whole milliseconds")
	}
	return d, nil
}
