package limits

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// preset is a vendor shape: the dimensions it declares, each a metric key
// in the file, the dimension's suffix and its type.
type preset struct {
	vendor  string
	metrics []metric
}

type metric struct {
	key string // in the file, e.g. "rpm"
	typ bucket.LimitType
}

// presetTable returns the built-in vendor shapes. Each metric key names
// both the file field and the dimension suffix: openai rpm → openai#rpm.
func presetTable() map[string]preset {
	return map[string]preset{
		"openai":     {vendor: "openai", metrics: []metric{{"rpm", bucket.Requests}, {"tpm", bucket.Tokens}}},
		"anthropic":  {vendor: "anthropic", metrics: []metric{{"rpm", bucket.Requests}, {"input_tpm", bucket.Tokens}, {"output_tpm", bucket.Tokens}}},
		"elevenlabs": {vendor: "elevenlabs", metrics: []metric{{"concurrent", bucket.Concurrent}}},
	}
}

// PresetNames lists the presets, sorted.
func PresetNames() []string {
	out := make([]string, 0, 3)
	for k := range presetTable() {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (p *parser) presets(n *yaml.Node) {
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, "presets", "must be a list of presets (- preset: openai, …)")
		return
	}
	for i, item := range n.Content {
		path := fmt.Sprintf("presets[%d]", i)
		if item.Kind != yaml.MappingNode {
			p.errorf(item, path, "must be a mapping with preset: and the vendor's limits")
			continue
		}
		fields := map[string]*yaml.Node{}
		keys := map[string]*yaml.Node{}
		for j := 0; j+1 < len(item.Content); j += 2 {
			fields[item.Content[j].Value] = item.Content[j+1]
			keys[item.Content[j].Value] = item.Content[j]
		}
		pn := fields["preset"]
		if pn == nil {
			p.errorf(item, path+".preset", "missing: one of %s", strings.Join(PresetNames(), ", "))
			continue
		}
		pr, ok := presetTable()[pn.Value]
		if !ok {
			p.errorf(pn, path+".preset", "%q: unknown preset (want one of %s)", pn.Value, strings.Join(PresetNames(), ", "))
			continue
		}
		allowed := map[string]bool{"preset": true, "vendor": true, "model": true, "max_debt": true}
		for _, m := range pr.metrics {
			allowed[m.key] = true
		}
		bad := false
		for k, kn := range keys {
			if !allowed[k] {
				want := []string{"vendor", "model", "max_debt"}
				for _, m := range pr.metrics {
					want = append(want, m.key)
				}
				p.errorf(kn, path+"."+k, "unknown field for preset %s (want %s)", pr.vendor, strings.Join(want, ", "))
				bad = true
			}
		}
		if bad {
			continue
		}
		vendor := pr.vendor
		if v := fields["vendor"]; v != nil {
			vendor = v.Value
		}
		prefix := vendor
		if m := fields["model"]; m != nil {
			if m.Value == "" || strings.Contains(m.Value, "#") {
				p.errorf(m, path+".model", "must be a non-empty name without '#'")
				continue
			}
			prefix += "#" + m.Value
		}
		var maxDebt int64
		if n := fields["max_debt"]; n != nil {
			v, err := intOf(n)
			if err != nil {
				p.errorf(n, path+".max_debt", "%v", err)
				continue
			}
			maxDebt = v
		}
		declared := 0
		for _, m := range pr.metrics {
			n := fields[m.key]
			if n == nil {
				continue
			}
			declared++
			v, err := intOf(n)
			if err != nil {
				p.errorf(n, path+"."+m.key, "%v", err)
				continue
			}
			c := bucket.ConcurrentSlots(v)
			if m.typ != bucket.Concurrent {
				c = bucket.PerPeriod(m.typ, v, time.Minute)
				if m.typ == bucket.Tokens {
					c.MaxDebt = maxDebt
				}
			}
			if err := c.Validate(); err != nil {
				p.errorf(n, path+"."+m.key, "%v: must be between 1 and 10^12", v)
				continue
			}
			p.add(n, path+"."+m.key, Entry{Bucket: store.Bucket{Name: prefix + "#" + m.key, Config: c},
				Source: "preset " + pn.Value, Line: n.Line}, nil)
		}
		if declared == 0 {
			want := make([]string, len(pr.metrics))
			for i, m := range pr.metrics {
				want[i] = m.key
			}
			p.errorf(item, path, "preset %s declares no limit; give at least one of %s", pn.Value, strings.Join(want, ", "))
		}
	}
}
