package limits

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/vendors"
)

// preset is a vendor profile as a file declares it: the fields that carry
// its limits (each also the dimension suffix: openai rpm → openai#rpm),
// the field that scopes it, and how to build the profile.
type preset struct {
	vendor  vendors.Vendor
	scope   string   // "model", "deployment" or "family"
	metrics []string // limit fields, in the profile's order
	words   []string // other string fields (elevenlabs plan)
	build   func(scope string, n map[string]int64, w map[string]string, opts ...vendors.ProfileOption) (vendors.Profile, error)
}

// presetTable returns the built-in presets, each built from its vendor's
// profile (package vendors), so that a preset's buckets are the profile's.
func presetTable() map[string]preset {
	return map[string]preset{
		"openai": {vendor: vendors.OpenAI, scope: "model", metrics: []string{"rpm", "tpm", "rpd", "tpd"},
			build: func(s string, n map[string]int64, _ map[string]string, o ...vendors.ProfileOption) (vendors.Profile, error) {
				return vendors.OpenAIProfile(vendors.OpenAILimits{Model: s, RPM: n["rpm"], TPM: n["tpm"], RPD: n["rpd"], TPD: n["tpd"]}, o...)
			}},
		"anthropic": {vendor: vendors.Anthropic, scope: "model", metrics: []string{"rpm", "input_tpm", "output_tpm"},
			build: func(s string, n map[string]int64, _ map[string]string, o ...vendors.ProfileOption) (vendors.Profile, error) {
				return vendors.AnthropicProfile(vendors.AnthropicLimits{Model: s, RPM: n["rpm"], InputTPM: n["input_tpm"], OutputTPM: n["output_tpm"]}, o...)
			}},
		"azure": {vendor: vendors.Azure, scope: "deployment", metrics: []string{"rpm", "tpm"},
			build: func(s string, n map[string]int64, _ map[string]string, o ...vendors.ProfileOption) (vendors.Profile, error) {
				return vendors.AzureProfile(vendors.AzureLimits{Deployment: s, TPM: n["tpm"], RPM: n["rpm"]}, o...)
			}},
		"gemini": {vendor: vendors.Gemini, scope: "model", metrics: []string{"rpm", "tpm", "rpd"},
			build: func(s string, n map[string]int64, _ map[string]string, o ...vendors.ProfileOption) (vendors.Profile, error) {
				return vendors.GeminiProfile(vendors.GeminiLimits{Model: s, RPM: n["rpm"], TPM: n["tpm"], RPD: n["rpd"]}, o...)
			}},
		"groq": {vendor: vendors.Groq, scope: "model", metrics: []string{"rpm", "tpm", "input_tpm", "output_tpm", "rpd", "tpd"},
			build: func(s string, n map[string]int64, _ map[string]string, o ...vendors.ProfileOption) (vendors.Profile, error) {
				return vendors.GroqProfile(vendors.GroqLimits{Model: s, RPM: n["rpm"], RPD: n["rpd"], TPM: n["tpm"], TPD: n["tpd"], InputTPM: n["input_tpm"], OutputTPM: n["output_tpm"]}, o...)
			}},
		"elevenlabs": {vendor: vendors.ElevenLabs, scope: "family", metrics: []string{"concurrent"}, words: []string{"plan"},
			build: func(s string, n map[string]int64, w map[string]string, o ...vendors.ProfileOption) (vendors.Profile, error) {
				return vendors.ElevenLabsProfile(vendors.ElevenLabsLimits{Plan: vendors.ElevenLabsPlan(w["plan"]), Family: vendors.ElevenLabsFamily(s), Concurrent: n["concurrent"]}, o...)
			}},
	}
}

// PresetNames lists the presets, sorted.
func PresetNames() []string {
	t := presetTable()
	out := make([]string, 0, len(t))
	for k := range t {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// common are the fields every preset accepts besides its own.
var common = []string{"vendor", "max_debt", "headroom", "request_margin", "cost_reading", "burst"}

// fields returns the keys a preset accepts, in the order errors list them.
func (pr preset) fields() []string {
	out := append([]string{pr.scope}, pr.words...)
	if pr.scope != "model" {
		out = append(out, "model")
	}
	out = append(out, common...)
	return append(out, pr.metrics...)
}

func (p *parser) presets(n *yaml.Node) {
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, "presets", "must be a list of presets (- preset: openai, …)")
		return
	}
	for i, item := range n.Content {
		p.preset(fmt.Sprintf("presets[%d]", i), item)
	}
}

// presetItem is one preset's fields as the file gives them.
type presetItem struct {
	path   string
	at     *yaml.Node
	fields map[string]*yaml.Node // key → value
	keys   map[string]*yaml.Node // key → the key node
}

func (p *parser) preset(path string, item *yaml.Node) {
	if item.Kind != yaml.MappingNode {
		p.errorf(item, path, "must be a mapping with preset: and the vendor's limits")
		return
	}
	it := presetItem{path: path, at: item, fields: map[string]*yaml.Node{}, keys: map[string]*yaml.Node{}}
	for j := 0; j+1 < len(item.Content); j += 2 {
		it.fields[item.Content[j].Value] = item.Content[j+1]
		it.keys[item.Content[j].Value] = item.Content[j]
	}
	pn := it.fields["preset"]
	if pn == nil {
		p.errorf(item, path+".preset", "missing: one of %s", strings.Join(PresetNames(), ", "))
		return
	}
	pr, ok := presetTable()[pn.Value]
	if !ok {
		p.errorf(pn, path+".preset", "%q: unknown preset (want one of %s)", pn.Value, strings.Join(PresetNames(), ", "))
		return
	}
	if !p.knownFields(it, pr) {
		return
	}
	prefix, scope, ok := p.presetPrefix(it, pr)
	if !ok {
		return
	}
	limits, words, opts, maxDebt, ok := p.presetValues(it, pr)
	if !ok {
		return
	}
	if len(limits) == 0 && words["plan"] == "" {
		p.errorf(item, path, "preset %s declares no limit; give at least one of %s", pn.Value, strings.Join(pr.metrics, ", "))
		return
	}
	prof, err := pr.build(scope, limits, words, opts...)
	if err != nil {
		p.profileError(it, err)
		return
	}
	p.addProfile(it, pn.Value, prefix, prof, maxDebt)
}

// knownFields reports unknown keys; it returns false if there were any.
func (p *parser) knownFields(it presetItem, pr preset) bool {
	allowed := map[string]bool{"preset": true}
	for _, k := range pr.fields() {
		allowed[k] = true
	}
	ok := true
	for k, kn := range it.keys {
		if !allowed[k] {
			p.errorf(kn, it.path+"."+k, "unknown field for preset %s (want %s)", pr.vendor, strings.Join(pr.fields(), ", "))
			ok = false
		}
	}
	return ok
}

// presetPrefix returns the dimension prefix (vendor[#scope]) and the scope
// to give the profile. model: scopes any preset by a free name; the
// preset's own scope field (deployment, family) is validated by the
// profile.
func (p *parser) presetPrefix(it presetItem, pr preset) (prefix, scope string, ok bool) {
	name := func(key string) (string, bool) {
		n := it.fields[key]
		if n == nil {
			return "", true
		}
		if n.Kind != yaml.ScalarNode || n.Value == "" || strings.Contains(n.Value, "#") {
			p.errorf(n, it.path+"."+key, "must be a non-empty name without '#'")
			return "", false
		}
		return n.Value, true
	}
	prefix = string(pr.vendor)
	if v, ok := name("vendor"); !ok {
		return "", "", false
	} else if v != "" {
		prefix = v
	}
	own, ok := name(pr.scope)
	if !ok {
		return "", "", false
	}
	model := ""
	if pr.scope != "model" {
		if model, ok = name("model"); !ok {
			return "", "", false
		}
	}
	if own != "" && model != "" {
		p.errorf(it.keys["model"], it.path+".model", "give %s or model, not both", pr.scope)
		return "", "", false
	}
	if s := own + model; s != "" {
		prefix += "#" + s
	}
	return prefix, own, true
}

// presetValues reads the limits, words, headroom, bursts and max_debt.
func (p *parser) presetValues(it presetItem, pr preset) (limits map[string]int64, words map[string]string, opts []vendors.ProfileOption, maxDebt int64, ok bool) {
	ok = true
	limits, words = map[string]int64{}, map[string]string{}
	for _, m := range pr.metrics {
		n := it.fields[m]
		if n == nil {
			continue
		}
		v, err := intOf(n)
		if err == nil && (v < 1 || v > bucket.MaxCapacity) {
			err = fmt.Errorf("%d: must be between 1 and 10^12", v)
		}
		if err != nil {
			p.errorf(n, it.path+"."+m, "%v", err)
			ok = false
			continue
		}
		limits[m] = v
	}
	for _, w := range pr.words {
		if n := it.fields[w]; n != nil {
			words[w] = n.Value
		}
	}
	if n := it.fields["max_debt"]; n != nil {
		v, err := intOf(n)
		if err == nil && (v < bucket.NoDebt || v > bucket.MaxCapacity) {
			err = fmt.Errorf("%d: must be -1 (no debt), 0 (default: capacity) or up to 10^12 tokens", v)
		}
		if err != nil {
			p.errorf(n, it.path+".max_debt", "%v", err)
			ok = false
		}
		maxDebt = v
	}
	if n := it.fields["headroom"]; n != nil {
		h, err := ParseHeadroom(n.Value)
		if err != nil || n.Kind != yaml.ScalarNode {
			p.errorf(n, it.path+".headroom", "%q: must be a fraction from 0 to 0.5 or a percentage from 0%% to 50%% (default 2%%)", n.Value)
			ok = false
		} else {
			opts = append(opts, vendors.WithHeadroom(h))
		}
	}
	if n := it.fields["request_margin"]; n != nil {
		d, err := time.ParseDuration(n.Value)
		if err != nil || n.Kind != yaml.ScalarNode || d < 0 || d > vendors.MaxRequestMargin || d%time.Millisecond != 0 {
			p.errorf(n, it.path+".request_margin", "%q: must be a duration from 0s to 10s in whole milliseconds (default 50ms)", n.Value)
			ok = false
		} else {
			opts = append(opts, vendors.WithRequestMargin(d))
		}
	}
	if n := it.fields["cost_reading"]; n != nil {
		r, rok := p.costReadings(it.path+".cost_reading", n, pr)
		opts = append(opts, r...)
		ok = ok && rok
	}
	if n := it.fields["burst"]; n != nil {
		b, bok := p.bursts(it.path+".burst", n, pr)
		opts = append(opts, b...)
		ok = ok && bok
	}
	return limits, words, opts, maxDebt, ok
}

// bursts reads burst: {rpm: 10, tpm: 5000}.
func (p *parser) bursts(path string, n *yaml.Node, pr preset) ([]vendors.ProfileOption, bool) {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, path, "must be a mapping of limit to capacity, e.g. {rpm: 5}")
		return nil, false
	}
	return p.perLimit(path, n, pr, func(m vendors.Metric, v *yaml.Node) (vendors.ProfileOption, error) {
		c, err := intOf(v)
		if err != nil {
			return nil, err
		}
		return vendors.WithBurst(m, c), nil
	})
}

// costReadings reads cost_reading: admission_kept (every token limit) or
// cost_reading: {tpm: adjusted_to_usage, tpd: admission_kept}.
func (p *parser) costReadings(path string, n *yaml.Node, pr preset) ([]vendors.ProfileOption, bool) {
	const want = "adjusted_to_usage or admission_kept"
	if n.Kind == yaml.ScalarNode {
		r, ok := vendors.ParseReading(n.Value)
		if !ok {
			p.errorf(n, path, "%q: must be %s, or a mapping of limit to reading", n.Value, want)
			return nil, false
		}
		return []vendors.ProfileOption{vendors.WithCostReading(r)}, true
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, path, "must be %s, or a mapping of limit to reading, e.g. {tpm: admission_kept}", want)
		return nil, false
	}
	return p.perLimit(path, n, pr, func(m vendors.Metric, v *yaml.Node) (vendors.ProfileOption, error) {
		r, ok := vendors.ParseReading(v.Value)
		if !ok || v.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("%q: must be %s", v.Value, want)
		}
		return vendors.WithCostReading(r, m), nil
	})
}

// perLimit reads a mapping of the preset's limits to values with opt,
// reporting an unknown limit or a value opt refuses at its line, and
// returns the options of the others.
func (p *parser) perLimit(path string, n *yaml.Node, pr preset, opt func(vendors.Metric, *yaml.Node) (vendors.ProfileOption, error)) ([]vendors.ProfileOption, bool) {
	var opts []vendors.ProfileOption
	ok := true
	for j := 0; j+1 < len(n.Content); j += 2 {
		k, v := n.Content[j], n.Content[j+1]
		m, known := vendors.MetricOf(k.Value)
		if !known || !contains(pr.metrics, k.Value) {
			p.errorf(k, path+"."+k.Value, "unknown limit for preset %s (want %s)", pr.vendor, strings.Join(pr.metrics, ", "))
			ok = false
			continue
		}
		o, err := opt(m, v)
		if err != nil {
			p.errorf(v, path+"."+k.Value, "%v", err)
			ok = false
			continue
		}
		opts = append(opts, o)
	}
	return opts, ok
}

// profileError places a profile's *bucket.FieldError on the field it names.
func (p *parser) profileError(it presetItem, err error) {
	var fe *bucket.FieldError
	if !errors.As(err, &fe) {
		p.errorf(it.at, it.path, "%v", err)
		return
	}
	at, field := it.at, it.path
	key := fe.Field
	if group, sub, isSub := strings.Cut(strings.TrimSuffix(key, "]"), "["); isSub && strings.HasSuffix(key, "]") {
		if gn := it.fields[group]; gn != nil {
			at, field = gn, it.path+"."+group
			if gn.Kind == yaml.MappingNode {
				for j := 0; j+1 < len(gn.Content); j += 2 {
					if gn.Content[j].Value == sub {
						at, field = gn.Content[j+1], it.path+"."+group+"."+sub
					}
				}
			}
		}
	} else if n := it.fields[key]; n != nil {
		at, field = n, it.path+"."+key
	}
	p.errorf(at, field, "%v: %s", fe.Value, fe.Reason)
}

// addProfile adds the profile's buckets under the file's prefix, each at
// the line of the field that declared it.
func (p *parser) addProfile(it presetItem, name, prefix string, prof vendors.Profile, maxDebt int64) {
	p.prof = append(p.prof, fileProfile(prof, prefix, maxDebt))
	for _, d := range prof.Dimensions {
		key := vendors.Suffix(d.Metric)
		at := it.fields[key]
		if at == nil {
			at = it.fields["plan"]
		}
		if at == nil {
			at = it.at
		}
		c := d.Config
		if c.Type == bucket.Tokens {
			c.MaxDebt = maxDebt
		}
		if err := c.Validate(); err != nil {
			var fe *bucket.FieldError
			if errors.As(err, &fe) && fe.Field == "max_debt" {
				p.errorf(it.fields["max_debt"], it.path+".max_debt", "%v: %s", fe.Value, fe.Reason)
				return
			}
			p.errorf(at, it.path+"."+key, "%v", err)
			continue
		}
		p.add(at, it.path+"."+key, Entry{Bucket: store.Bucket{Name: prefix + "#" + key, Config: c},
			Source: "preset " + name, Line: at.Line}, nil)
	}
}

// ParseHeadroom reads a headroom as a fraction (0.05) or a percentage
// (5%), from 0 to 0.5.
func ParseHeadroom(s string) (float64, error) {
	t, pct := strings.CutSuffix(strings.TrimSpace(s), "%")
	h, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if pct {
		h /= 100
	}
	if err != nil || !(h >= 0 && h <= vendors.MaxHeadroom) {
		return 0, fmt.Errorf("%q: must be a fraction from 0 to 0.5 or a percentage from 0%% to 50%%", s)
	}
	return h, nil
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
