package limits_test

import (
	"strings"
	"testing"

	"github.com/ontopix/sluice/limits"
)

func TestUnmetered(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // substrings, one per warning
	}{
		{"scoped only", "version: 1\npresets:\n  - preset: openai\n    model: gpt-4o\n    rpm: 500\n    tpm: 30000\n", []string{"openai: presets cover only gpt-4o"}},
		{"scoped and unscoped", "version: 1\npresets:\n  - preset: openai\n    model: gpt-4o\n    rpm: 500\n    tpm: 30000\n  - preset: openai\n    rpm: 500\n    tpm: 30000\n", nil},
		{"not metered by the transport", "version: 1\npresets:\n  - preset: gemini\n    model: gemini-2.5-flash\n    rpm: 10\n    tpm: 250000\n    rpd: 250\n", nil},
		{"unscoped", "version: 1\npresets:\n  - preset: anthropic\n    rpm: 50\n    input_tpm: 40000\n    output_tpm: 8000\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := limits.Parse("test.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			got := limits.Unmetered(f)
			if len(got) != len(tt.want) {
				t.Fatalf("got %q, want %d warnings", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) || !strings.Contains(got[i], "WithFallbackProfile") {
					t.Errorf("warning %q, want it to contain %q and the fix", got[i], w)
				}
			}
		})
	}
}
