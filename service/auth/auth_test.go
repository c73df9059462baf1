package auth

import (
	"strings"
	"testing"
)

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"*", "openai#gpt-4o#tpm", true},
		{"openai#*", "openai#gpt-4o#tpm", true},
		{"openai#*", "anthropic#rpm", false},
		{"openai#*#tpm", "openai#gpt-4o#tpm", true},
		{"openai#*#tpm", "openai#gpt-4o#rpm", false},
		{"*#tpm", "openai#tpm", true},
		{"ab*ba", "aba", false},
		{"a*b*c", "abc", true},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{"", "", true},
	}
	for _, tt := range tests {
		if got := glob(tt.pattern, tt.s); got != tt.want {
			t.Errorf("glob(%q, %q): got %v, want %v", tt.pattern, tt.s, got, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	tests := []struct{ src, want string }{
		{"principals: []\n", "principals: at least one"},
		{"principals:\n  - token_sha256: " + hash + "\n    verbs: [acquire]\n    dimensions: ['*']\n", "principals[0].name: required"},
		{"principals:\n  - name: a\n    verbs: [acquire]\n    dimensions: ['*']\n", "give token_sha256 or client_cert"},
		{"principals:\n  - name: a\n    token_sha256: slc_abc\n    verbs: [acquire]\n    dimensions: ['*']\n", "is a token, not its hash"},
		{"principals:\n  - name: a\n    token_sha256: 12\n    verbs: [acquire]\n    dimensions: ['*']\n", "64 hex digits"},
		{"principals:\n  - name: a\n    token_sha256: " + hash + "\n    verbs: [fly]\n    dimensions: ['*']\n", `"fly" is not acquire`},
		{"principals:\n  - name: a\n    token_sha256: " + hash + "\n    verbs: [acquire]\n", "principals[0].dimensions (a)"},
		{"principals:\n  - name: a\n    token_sha256: " + hash + "\n    verbs: [acquire]\n    dimensions: ['*']\n  - name: a\n    token_sha256: " + hash + "\n    verbs: [acquire]\n    dimensions: ['*']\n", `principals[1].name "a": another principal`},
		{"principals:\n  - name: a\n    client_cert: {}\n    verbs: [acquire]\n    dimensions: ['*']\n", "give common_name or dns_name"},
		{"principals:\n  - name: a\n    tokn: x\n", "field tokn not found"},
	}
	for _, tt := range tests {
		_, err := Parse("auth.yaml", []byte(tt.src))
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "auth.yaml") {
			t.Errorf("%q: got %v, want an error naming auth.yaml and %q", tt.src, err, tt.want)
		}
	}
}

func TestAllows(t *testing.T) {
	p := &Principal{Name: "svc", Verbs: []Verb{Acquire}, Dimensions: []string{"openai#*"}}
	if err := p.Allows(Acquire, "openai#rpm", "openai#tpm"); err != nil {
		t.Error(err)
	}
	if err := p.Allows(Settle, "openai#tpm"); err == nil || !strings.Contains(err.Error(), "svc may not settle") {
		t.Errorf("settle: got %v", err)
	}
	if err := p.Allows(Acquire, "openai#rpm", "anthropic#rpm"); err == nil || !strings.Contains(err.Error(), `"anthropic#rpm"`) {
		t.Errorf("another vendor: got %v", err)
	}
	admin := &Principal{Name: "ops", Verbs: []Verb{Admin}, Dimensions: []string{"*"}}
	if err := admin.Allows(Settle, "x"); err != nil {
		t.Errorf("admin: %v", err)
	}
}
