package bucket

import (
	"testing"
	"time"
)

func TestChargedSince(t *testing.T) {
	const half = ChargedSpan / 2
	tests := []struct {
		name              string
		recorded, current int64
		want              int64
	}{
		{"nothing since", 7, 7, 0},
		{"a charge", 100, 350, 250},
		{"a refund", 350, 100, -250},
		{"across the upper wrap", half - 10, WrapCharged(half + 15), 25},
		{"across the lower wrap", -half + 5, WrapCharged(-half - 20), -25},
	}
	for _, tt := range tests {
		if got := ChargedSince(tt.recorded, tt.current); got != tt.want {
			t.Errorf("%s: ChargedSince(%d, %d) = %d, want %d", tt.name, tt.recorded, tt.current, got, tt.want)
		}
	}
}

func TestWrapCharged(t *testing.T) {
	const half = ChargedSpan / 2
	tests := []struct{ in, want int64 }{
		{0, 0}, {half - 1, half - 1}, {half, -half}, {-half, -half}, {-half - 1, half - 1}, {3 * ChargedSpan, 0},
	}
	for _, tt := range tests {
		if got := WrapCharged(tt.in); got != tt.want {
			t.Errorf("WrapCharged(%d) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestChargeDelay(t *testing.T) {
	tpm := PerPeriod(Tokens, 5000, time.Second).Limits() // 5 000 millitokens per ms
	tests := []struct {
		name  string
		l     Limits
		extra int64
		want  int64
	}{
		{"no extra", tpm, 0, 0},
		{"refunds need no delay", tpm, -1_000_000, 0},
		{"exact", tpm, 250_000, 50},
		{"rounds up", tpm, 250_001, 51},
		{"concurrent never waits", ConcurrentSlots(3).Limits(), 1000, 0},
		{"saturates", tpm, 1 << 62, MaxRetryMs},
	}
	for _, tt := range tests {
		if got := ChargeDelay(tt.l, tt.extra); got != tt.want {
			t.Errorf("%s: ChargeDelay(%d) = %d, want %d", tt.name, tt.extra, got, tt.want)
		}
	}
}
