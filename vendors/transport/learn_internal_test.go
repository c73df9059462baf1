package transport

import (
	"testing"

	"github.com/ontopix/sluice/vendors"
)

func TestOutputLearner(t *testing.T) {
	l := newOutputLearner(OutputLearning{Quantile: 0.9, Window: 10, MinSamples: 3, ColdStart: 500})
	est := func(model string, maxTokens, n int64) int64 {
		return l.estimate(vendors.Anthropic, Estimate{Model: model, MaxOutputTokens: maxTokens, N: n})
	}
	for _, c := range []struct {
		name string
		add  []int64 // outputs recorded for "m" before the estimate
		max  int64
		n    int64
		want int64
	}{
		{"cold start", nil, 0, 0, 500},
		{"cold start bounded by max_tokens", nil, 300, 0, 300},
		{"still cold with two samples", []int64{10, 20}, 0, 0, 500},
		{"p90 of 3 samples is the largest", []int64{30}, 0, 0, 30},
		{"p90 of 10", []int64{1, 2, 3, 4, 5, 6, 7}, 0, 0, 20},
		{"the window drops the oldest", []int64{100, 100, 100}, 0, 0, 100},
		{"bounded by max_tokens", nil, 50, 0, 50},
		{"bounded by max_tokens × n", nil, 40, 2, 80},
	} {
		for _, o := range c.add {
			l.add(vendors.Anthropic, "m", o)
		}
		if got := est("m", c.max, c.n); got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, got, c.want)
		}
	}
	if got := est("other", 0, 0); got != 500 {
		t.Errorf("another model: got %d, want the cold start 500", got)
	}
	if got := l.estimate(vendors.Groq, Estimate{Model: "m"}); got != 500 {
		t.Errorf("another vendor's model: got %d, want the cold start 500", got)
	}
}

func TestOutputLearnerDefaults(t *testing.T) {
	l := newOutputLearner(OutputLearning{Quantile: 2, MinSamples: 1000})
	if l.cfg.Quantile != DefaultOutputLearning.Quantile || l.cfg.Window != DefaultOutputLearning.Window ||
		l.cfg.MinSamples != DefaultOutputLearning.Window || l.cfg.ColdStart != DefaultOutputLearning.ColdStart {
		t.Errorf("config %+v", l.cfg)
	}
}

func TestOutputLearnerModelBound(t *testing.T) {
	l := newOutputLearner(OutputLearning{MinSamples: 1})
	for i := range maxLearnedModels + 5 {
		l.add(vendors.Anthropic, string(rune('a'+i%26))+string(rune(i)), 7)
	}
	if len(l.models) != maxLearnedModels {
		t.Errorf("%d models kept, want %d", len(l.models), maxLearnedModels)
	}
}
