package limits

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParse checks Parse on any input: no panic; every error names the
// file and, when it is about a position, one inside the file; a parsed
// file has valid buckets, sorted by name, each declared once.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"dimensions:\n  a#b:\n    type: requests\n    capacity: 5\n    per: 1m\n",
		"dimensions:\n  a#b:\n    type: tokens\n    capacity: 100\n    per: 1h\n    refill: 50\n    cost_per_call: 2\n    max_debt: -1\n",
		"dimensions:\n  a#b:\n    type: concurrent\n    capacity: 3\n",
		"presets:\n  - preset: openai\n    model: gpt-4o\n    rpm: 500\n    tpm: 30000\n  - preset: elevenlabs\n    concurrent: 5\n",
		"presets:\n  - preset: anthropic\n    rpm: 50\n    input_tpm: 40000\n    output_tpm: 8000\n",
		"dimensions:\n  a#b:\n    type: requests\n    capacity: 0\n",
		"presets:\n  - preset: azure\n    deployment: eu\n    tpm: 30000\n    headroom: 5%\n    burst: {tpm: 6000, rpm: 2}\n",
		"presets:\n  - preset: gemini\n    model: flash\n    rpm: 10\n    tpm: 250000\n    rpd: 250\n  - preset: groq\n    rpm: 30\n    tpd: 1000\n    max_debt: -1\n",
		"presets:\n  - preset: elevenlabs\n    plan: creator\n    family: flash_turbo\n    headroom: 0.5\n",
		"- a\n",
		"",
		"dimensions: [",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("x.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "x.yaml") {
				t.Fatalf("error %q does not name the file", err)
			}
			lines := 1 + strings.Count(string(data), "\n") + strings.Count(string(data), "\r")
			for _, e := range unjoin(err) {
				var pe *Error
				if !errors.As(e, &pe) {
					continue
				}
				if pe.File != "x.yaml" || pe.Line < 1 || pe.Line > lines || pe.Column < 1 || pe.Column > len(data)+1 {
					t.Fatalf("error %q: position %d:%d outside the %d-line, %d-byte file", pe, pe.Line, pe.Column, lines, len(data))
				}
			}
			return
		}
		for i, e := range file.Entries {
			if i > 0 && file.Entries[i-1].Name >= e.Name {
				t.Fatalf("entries not sorted or not unique at %q", e.Name)
			}
			if err := e.Config.Validate(); err != nil {
				t.Fatalf("entry %q parsed with an invalid config: %v", e.Name, err)
			}
		}
	})
}

// unjoin returns the errors an errors.Join made, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// FuzzParseHeadroom checks ParseHeadroom on any input: no panic, and an
// accepted headroom is a number from 0 to 0.5.
func FuzzParseHeadroom(f *testing.F) {
	for _, s := range []string{"0.05", "5%", "50%", "0", "-1", "NaN", "1e-3", "Inf%", " 2 % ", "%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseHeadroom(s)
		if err == nil && !(h >= 0 && h <= 0.5) {
			t.Fatalf("ParseHeadroom(%q) = %v, accepted out of range", s, h)
		}
	})
}
