package limits

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

func TestExample(t *testing.T) {
	f, err := Load("../docs/examples/limits.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The presets' buckets are the vendor profiles' (package vendors): 2 %
	// headroom stretches each minute to 61.225 s, and a requests bucket
	// holds one second's worth (at least one request), not a minute's, less
	// 50 ms of requests kept spare for arrival jitter (or, holding one, is
	// spaced 50 ms further: 1.25 s a request at 50 RPM).
	minute98 := 61_225 * time.Millisecond
	rate := func(typ bucket.LimitType, capacity, amount int64) bucket.Config {
		return bucket.Config{Type: typ, Capacity: capacity, RefillAmount: amount, RefillPeriod: minute98}
	}
	tpm := rate(bucket.Tokens, 29400, 30000)
	tpm.MaxDebt = 5000
	want := map[string]bucket.Config{
		"anthropic#input_tpm":    rate(bucket.Tokens, 39200, 40000),
		"anthropic#output_tpm":   rate(bucket.Tokens, 7840, 8000),
		"anthropic#rpm":          {Type: bucket.Requests, Capacity: 1, RefillAmount: 50, RefillPeriod: 62_500 * time.Millisecond},
		"deepgram#concurrent":    bucket.ConcurrentSlots(20),
		"elevenlabs#concurrent":  bucket.ConcurrentSlots(5),
		"openai#gpt-4o#rpm":      rate(bucket.Requests, 7, 500),
		"openai#gpt-4o#tpm":      tpm,
		"openai#gpt-4o-mini#tpm": {Type: bucket.Tokens, Capacity: 250000, RefillAmount: 200000, RefillPeriod: time.Minute, CostPerCall: 1000, MaxDebt: 20000},
	}
	if len(f.Entries) != len(want) {
		t.Fatalf("%d entries: %+v", len(f.Entries), f.Entries)
	}
	for i, e := range f.Entries {
		if i > 0 && f.Entries[i-1].Name >= e.Name {
			t.Errorf("not sorted at %s", e.Name)
		}
		if w, ok := want[e.Name]; !ok || w != e.Config {
			t.Errorf("%s: %+v, want %+v", e.Name, e.Config, w)
		}
	}
}

func TestErrorsNamePosition(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"dimensions:\n  a#b:\n    type: requests\n    capacity: 0\n    per: 1m\n", "x.yaml:4:15: dimensions[\"a#b\"].capacity: 0: must be between 1"},
		{"dimensions:\n  a#b:\n    type: tokenz\n", "x.yaml:3:11: dimensions[\"a#b\"].type: \"tokenz\""},
		{"dimensions:\n  a#b:\n    type: requests\n    capacity: 5\n", "x.yaml:3:5: dimensions[\"a#b\"].per: missing"},
		{"dimensions:\n  a#b:\n    type: requests\n    capacity: 5\n    per: fortnight\n", "x.yaml:5:10: dimensions[\"a#b\"].per: \"fortnight\""},
		{"dimensions:\n  a#b:\n    type: concurrent\n    capacity: 5\n    per: 1m\n", "x.yaml:5:10: dimensions[\"a#b\"].per: a concurrent dimension does not refill"},
		{"dimensions:\n  a#b:\n    type: requests\n    capacity: 5\n    per: 1m\n    cost_per_call: 9\n", "x.yaml:6:20: dimensions[\"a#b\"].cost_per_call: 9: must be between 1 and the capacity (5)"},
		{"dimensions:\n  a#b:\n    type: requests\n    capacity: lots\n    per: 1m\n", "x.yaml:4:15: dimensions[\"a#b\"].capacity: \"lots\": must be a whole number"},
		{"dimensions:\n  a#b:\n    type: requests\n    capacity: 5\n    per: 1m\n    burst: 9\n", "x.yaml:6:5: dimensions[\"a#b\"].burst: unknown field"},
		{"dimensions:\n  lease#x:\n    type: concurrent\n    capacity: 5\n", "x.yaml:2:3: dimensions[\"lease#x\"]: invalid dimension name"},
		{"presets:\n  - preset: openai\n    rpm: 5\ndimensions:\n  openai#rpm:\n    type: concurrent\n    capacity: 1\n", "x.yaml:5:3: dimensions[\"openai#rpm\"]: dimension \"openai#rpm\" is already declared at line 3"},
		{"presets:\n  - preset: mistral\n    rpm: 5\n", "x.yaml:2:13: presets[0].preset: \"mistral\": unknown preset"},
		{"presets:\n  - preset: anthropic\n    tpm: 5\n", "x.yaml:3:5: presets[0].tpm: unknown field for preset anthropic"},
		{"presets:\n  - preset: elevenlabs\n", "x.yaml:2:5: presets[0]: preset elevenlabs declares no limit"},
		{"presets:\n  - preset: openai\n    rpm: -3\n", "x.yaml:3:10: presets[0].rpm: -3: must be between 1"},
		{"limits: {}\n", "x.yaml:1:1: limits: unknown key"},
		{"", "x.yaml:1:1: the file is empty"},
		{"---", "x.yaml:1:1: the file is empty"},
		{"# nothing yet\n---\n", "x.yaml:1:1: the file is empty"},
		{"- a\n", "x.yaml:1:1: must be a mapping"},
		{"dimensions:\n  a#b:\n    type: requests\n    capacity: 10\n    per: 1m\n    capacity: 1000000000000\n", "x.yaml:6:5: dimensions[\"a#b\"].capacity: given twice (first at line 4)"},
		{"presets:\n  - preset: openai\n    rpm: 500\n    rpm: 5000000\n", "x.yaml:4:5: presets[0].rpm: given twice (first at line 3)"},
		{"presets:\n  - preset: openai\n    rpm: 500\n    burst:\n      rpm: 10\n      rpm: 20\n", "x.yaml:6:7: presets[0].burst.rpm: given twice (first at line 5)"},
		{"dimensions:\n  a#b:\n    type: requests\n    capacity: 5\n    per: 1m\ndimensions:\n  c#d:\n    type: requests\n    capacity: 5\n    per: 1m\n", "x.yaml:6:1: dimensions: given twice (first at line 1)"},
		{"dimensions:\n  a#b:\n    type: tokens\n    capacity: 90000\n    per: 1m\n    refill: 0\n", "x.yaml:6:13: dimensions[\"a#b\"].refill: 0: must be between 1"},
		{"presets:\n  - preset: openai\n    vendor: tenant-a#openai\n    rpm: 5\n", "x.yaml:3:13: presets[0].vendor: must be a non-empty name without '#'"},
		{"presets:\n  - preset: openai\n    vendor: \"\"\n    rpm: 5\n", "x.yaml:3:13: presets[0].vendor: must be a non-empty name without '#'"},
		{"presets:\n  - preset: openai\n    vendor: [x]\n    rpm: 5\n", "x.yaml:3:13: presets[0].vendor: must be a non-empty name without '#'"},
		{"presets:\n  - preset: openai\n    rpm: 1000000000000\n    request_margin: 10s\n", "x.yaml:4:21: presets[0].request_margin: 10s: spaces 1000000000000 requests"},
	} {
		_, err := Parse("x.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant %s", c.yaml, err, c.want)
		}
	}
	// Every problem is reported, not just the first.
	_, err := Parse("x.yaml", []byte("dimensions:\n  a#b:\n    type: x\n  c#d:\n    type: y\n"))
	if err == nil || strings.Count(err.Error(), "x.yaml:") != 2 {
		t.Errorf("want two errors: %v", err)
	}
}

func TestPlan(t *testing.T) {
	f, err := Parse("x.yaml", []byte("presets:\n  - preset: openai\n    rpm: 600\n    tpm: 1000\n    headroom: 0\ndimensions:\n  e#c:\n    type: concurrent\n    capacity: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	// openai#rpm as the openai preset made it before it was built from the
	// profile (capacity = a minute's worth); openai#tpm as it makes it now.
	cur := []store.BucketState{
		{Bucket: store.Bucket{Name: "openai#rpm", Config: bucket.PerPeriod(bucket.Requests, 600, time.Minute)}, Tokens: 4000},
		{Bucket: store.Bucket{Name: "openai#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1000, time.Minute)}},
		{Bucket: store.Bucket{Name: "old#rpm", Config: bucket.PerPeriod(bucket.Requests, 1, time.Second)}},
	}
	got := map[string]Change{}
	for _, c := range Plan(f, cur, false, false) {
		got[c.Dimension] = c
	}
	if got["openai#tpm"].Action != Unchanged || got["e#c"].Action != Create || got["old#rpm"].Action != Unmanaged {
		t.Errorf("%+v", got)
	}
	want := []FieldChange{{"capacity", "600", "9"}, {"max_debt", "600", "9"}}
	if c := got["openai#rpm"]; c.Action != Update || !reflect.DeepEqual(c.Fields, want) || c.Reset {
		t.Errorf("update:\n got %+v\nwant %+v", c, want)
	}
	for _, c := range Plan(f, cur, true, true) {
		want := map[string]Action{"openai#rpm": Update, "openai#tpm": Reset, "e#c": Create, "old#rpm": Delete}[c.Dimension]
		if c.Action != want || (c.Action != Delete && !c.Reset) {
			t.Errorf("reset+prune: %+v", c)
		}
	}
}

// TestVendorsExample keeps docs/examples/vendors-limits.yaml, which
// docs/vendors.md shows, valid: every preset, 14 buckets.
func TestVendorsExample(t *testing.T) {
	f, err := Load("../docs/examples/vendors-limits.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Entries) != 14 {
		t.Errorf("%d entries, want 14: %+v", len(f.Entries), f.Entries)
	}
}
