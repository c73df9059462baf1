package limits

import (
	"testing"

	"github.com/ontopix/sluice/vendors"
)

func TestFileProfiles(t *testing.T) {
	f, err := Parse("limits.yaml", []byte(`
presets:
  - preset: openai
    model: gpt-4o
    rpm: 500
    tpm: 30000
    max_debt: 100
  - preset: anthropic
    vendor: anthropic-eu
    rpm: 50
    input_tpm: 30000
    output_tpm: 8000
  - preset: azure
    deployment: gpt-4o-eu
    tpm: 30000
`))
	if err != nil {
		t.Fatal(err)
	}
	ps := f.Profiles()
	if len(ps) != 3 {
		t.Fatalf("%d profiles, want 3", len(ps))
	}
	byName := map[string]int64{}
	for _, b := range f.Buckets() {
		byName[b.Name] = b.Config.MaxDebt
	}
	for _, p := range ps {
		for _, d := range p.Dimensions {
			if _, ok := byName[d.Name]; !ok {
				t.Errorf("profile %s/%s dimension %s is not one of the file's buckets", p.Vendor, p.Scope, d.Name)
			}
		}
	}
	tests := []struct {
		i          int
		vendor     vendors.Vendor
		scope, tpm string
	}{
		{0, vendors.OpenAI, "gpt-4o", "openai#gpt-4o#tpm"},
		{1, vendors.Anthropic, "", "anthropic-eu#input_tpm"},
		{2, vendors.Azure, "gpt-4o-eu", "azure#gpt-4o-eu#tpm"},
	}
	for _, tt := range tests {
		p := ps[tt.i]
		if p.Vendor != tt.vendor || p.Scope != tt.scope {
			t.Errorf("profile %d = %s/%q, want %s/%q", tt.i, p.Vendor, p.Scope, tt.vendor, tt.scope)
		}
		m := vendors.Tokens
		if tt.vendor == vendors.Anthropic {
			m = vendors.InputTokens
		}
		got, ok := p.Dimension(m)
		if !ok || got != tt.tpm {
			t.Errorf("profile %d tokens dimension = %q, %v; want %q", tt.i, got, ok, tt.tpm)
		}
		for _, d := range p.Dimensions {
			if d.Name == tt.tpm && d.Config.MaxDebt != byName[d.Name] {
				t.Errorf("%s max debt = %d, want the file's %d", d.Name, d.Config.MaxDebt, byName[d.Name])
			}
		}
	}
	// The copy is the caller's.
	ps[0].Dimensions[0].Name = "changed"
	if f.Profiles()[0].Dimensions[0].Name == "changed" {
		t.Error("Profiles shares its dimensions with the file")
	}
}
