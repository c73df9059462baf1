package envoyrls

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Config maps Envoy's rate limit descriptors to Sluice dimensions. Its
// zero value is not valid; build it with ParseConfig or LoadConfig, or
// fill it and call Validate.
type Config struct {
	// Domain is the rate limit domain Envoy sends (the filter's domain).
	// Requests for another domain are not limited.
	Domain string `yaml:"domain"`
	// CorrelationKey names a descriptor entry that identifies the request,
	// such as a request id the route adds: it is never part of a
	// dimension, and the second call Envoy sends for the same request (at
	// the end of a stream, apply_on_stream_done) settles the first one's
	// lease instead of acquiring again. Empty: every call stands alone.
	CorrelationKey string `yaml:"correlation_key"`
	// LeaseTTL is how long a request's lease lives when the end-of-stream
	// call never comes (a lost stream): its concurrent slots return after
	// it. Zero means 10 minutes.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// Rules map descriptors to dimensions; the first rule that matches a
	// descriptor applies, and a descriptor no rule matches is not limited.
	Rules []Rule `yaml:"rules"`
}

// Rule maps descriptors whose entries match Entries to Dimension.
type Rule struct {
	// Entries match a descriptor's entries (the correlation entry
	// removed) one to one, in order: "key" matches any value of the key,
	// "key=value" that value only.
	Entries []string `yaml:"entries"`
	// Dimension is the dimension's name; "{key}" is replaced by the value
	// of the descriptor's entry of that key.
	Dimension string `yaml:"dimension"`
}

// DefaultLeaseTTL is Config.LeaseTTL's default.
const DefaultLeaseTTL = 10 * time.Minute

// LoadConfig reads and parses a configuration file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("envoyrls: %w", err)
	}
	return ParseConfig(path, data)
}

// ParseConfig parses a configuration; name is the file's name, for errors.
// Unknown fields are errors.
func ParseConfig(name string, data []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("envoyrls: %s: %w", name, err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("envoyrls: %s: %w", name, err)
	}
	return &c, nil
}

// Validate checks c and fills in defaults. Each error names the field and
// the value.
func (c *Config) Validate() error {
	if c.Domain == "" {
		return fmt.Errorf("domain: required")
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.LeaseTTL < time.Second || c.LeaseTTL > 24*time.Hour {
		return fmt.Errorf("lease_ttl %s: must be from 1s to 24h", c.LeaseTTL)
	}
	if len(c.Rules) == 0 {
		return fmt.Errorf("rules: at least one rule is required")
	}
	for i, r := range c.Rules {
		if err := r.check(c.CorrelationKey); err != nil {
			return fmt.Errorf("rules[%d]: %w", i, err)
		}
	}
	return nil
}

func (r Rule) check(correlation string) error {
	if len(r.Entries) == 0 {
		return fmt.Errorf("entries: at least one entry is required")
	}
	keys := map[string]bool{}
	for j, e := range r.Entries {
		k, _, _ := strings.Cut(e, "=")
		if k == "" {
			return fmt.Errorf("entries[%d] %q: the key is empty", j, e)
		}
		if k == correlation {
			return fmt.Errorf("entries[%d] %q: %q is the correlation key, which is never part of a dimension", j, e, k)
		}
		keys[k] = true
	}
	if r.Dimension == "" {
		return fmt.Errorf("dimension: required")
	}
	rest := r.Dimension
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return fmt.Errorf("dimension %q: a '{' is not closed", r.Dimension)
		}
		if k := rest[i+1 : i+j]; !keys[k] {
			return fmt.Errorf("dimension %q: {%s} names no entry of the rule", r.Dimension, k)
		}
		rest = rest[i+j+1:]
	}
	if strings.ContainsRune(rest, '}') {
		return fmt.Errorf("dimension %q: a '}' is not opened", r.Dimension)
	}
	return nil
}

// entry is one key and value of a descriptor.
type entry struct{ key, value string }

// matcher is a Rule compiled for the request path: its entries' keys
// and values split once, and the placeholders of its dimension spelled out.
type matcher struct {
	keys, values []string
	exact        []bool
	dimension    string
	holes        []string // "{key}" of each entry, when the dimension has any
}

func compile(r Rule) matcher {
	m := matcher{dimension: r.Dimension}
	templated := strings.Contains(r.Dimension, "{")
	for _, e := range r.Entries {
		k, v, exact := strings.Cut(e, "=")
		m.keys, m.values, m.exact = append(m.keys, k), append(m.values, v), append(m.exact, exact)
		if templated {
			m.holes = append(m.holes, "{"+k+"}")
		}
	}
	return m
}

// match returns m's dimension for entries, and whether m matches them.
func (m *matcher) match(entries []entry) (string, bool) {
	if len(entries) != len(m.keys) {
		return "", false
	}
	for i, k := range m.keys {
		if entries[i].key != k || m.exact[i] && entries[i].value != m.values[i] {
			return "", false
		}
	}
	dim := m.dimension
	for i, h := range m.holes {
		dim = strings.ReplaceAll(dim, h, entries[i].value)
	}
	return dim, true
}
