package envoyrls_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/service/envoyrls"
)

// TestConfigErrors checks that each invalid configuration is refused with
// an error naming the field and the value.
func TestConfigErrors(t *testing.T) {
	rule := "\nrules:\n  - entries: [generic_key=a]\n    dimension: a\n"
	tests := []struct{ src, want string }{
		{"rules:\n  - entries: [k]\n    dimension: d\n", "domain: required"},
		{"domain: x\n", "rules: at least one rule"},
		{"domain: x\nlease_ttl: 10ms" + rule, "lease_ttl 10ms"},
		{"domain: x\nlease_ttl: 48h" + rule, "lease_ttl 48h0m0s"},
		{"domain: x\nrules:\n  - dimension: d\n", "rules[0]: entries"},
		{"domain: x\nrules:\n  - entries: [k]\n", "rules[0]: dimension: required"},
		{"domain: x\nrules:\n  - entries: [=v]\n    dimension: d\n", `rules[0]: entries[0] "=v"`},
		{"domain: x\nrules:\n  - entries: [model]\n    dimension: \"openai#{modle}#tpm\"\n", "{modle} names no entry"},
		{"domain: x\nrules:\n  - entries: [model]\n    dimension: \"openai#{model\"\n", "is not closed"},
		{"domain: x\ncorrelation_key: rid\nrules:\n  - entries: [rid]\n    dimension: d\n", "is the correlation key"},
		{"domain: x\nrulez: []" + rule, "field rulez not found"},
	}
	for _, tt := range tests {
		_, err := envoyrls.ParseConfig("envoy.yaml", []byte(tt.src))
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "envoy.yaml") {
			t.Errorf("%q: got %v, want an error naming envoy.yaml and %q", tt.src, err, tt.want)
		}
	}
}

// TestConfigDefaults parses a minimal configuration.
func TestConfigDefaults(t *testing.T) {
	c, err := envoyrls.ParseConfig("envoy.yaml", []byte("domain: llm\nrules:\n  - entries: [generic_key=a]\n    dimension: a\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.LeaseTTL, 10*time.Minute; got != want {
		t.Errorf("lease_ttl: got %s, want %s", got, want)
	}
}
