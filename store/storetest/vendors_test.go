package storetest

import "testing"

// TestScenariosSingleVendor keeps every golden scenario replayable by
// stores that take single-vendor acquisitions only
// (Harness.SingleVendorAcquire): no acquisition mixes vendors.
func TestScenariosSingleVendor(t *testing.T) {
	for _, v := range scenarios() {
		if i, ok := mixesVendors(v); ok {
			t.Errorf("scenario %s: step %d acquires dimensions of several vendors: %s", v.Name, i, jsonString(v.Steps[i].Items))
		}
	}
}

func TestMixesVendors(t *testing.T) {
	acquire := func(dims ...string) Step {
		s := Step{Op: "acquire"}
		for _, d := range dims {
			s.Items = append(s.Items, ItemSpec{Dimension: d, Cost: 1})
		}
		return s
	}
	tests := []struct {
		steps []Step
		at    int
		mixed bool
	}{
		{[]Step{acquire("openai#rpm", "openai#tpm"), acquire("x")}, 0, false},
		{[]Step{{Op: "peek", Dimensions: []string{"a#x", "b#x"}}, acquire("openai#rpm", "openai#tpm", "anthropic#rpm")}, 1, true},
		{[]Step{acquire("#rpm", "#tpm"), acquire("a#x", "a"), acquire("a#x", "ab#x")}, 2, true},
	}
	for _, tt := range tests {
		at, mixed := mixesVendors(Vector{Steps: tt.steps})
		if at != tt.at || mixed != tt.mixed {
			t.Errorf("mixesVendors(%s) = %d, %t; want %d, %t", jsonString(tt.steps), at, mixed, tt.at, tt.mixed)
		}
	}
}
