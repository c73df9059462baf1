package bucket

import (
	"errors"
	"math"
	"testing"
	"time"
)

func perMinute(n int64) Limits { return PerPeriod(Requests, n, time.Minute).Limits() }

func TestRefill(t *testing.T) {
	rpm := perMinute(100) // 100 tokens/min = 100000 milli / 60000 ms
	fast := PerPeriod(Tokens, 1_000_000, time.Minute).Limits()
	tests := []struct {
		name string
		l    Limits
		s    State
		now  int64
		want State
	}{
		{"no time passed", rpm, State{Tokens: 0, Last: 1000, Until: 0, Reserved: 0}, 1000, State{Tokens: 0, Last: 1000, Until: 0, Reserved: 0}},
		{"time went backwards", rpm, State{Tokens: 0, Last: 1000, Until: 0, Reserved: 0}, 500, State{Tokens: 0, Last: 1000, Until: 0, Reserved: 0}},
		{"one ms earns 1 milli, 0.6 ms used rounds up", rpm, State{Tokens: 0, Last: 0, Until: 0, Reserved: 0}, 1, State{Tokens: 1, Last: 1, Until: 0, Reserved: 0}},
		{"600 ms earn exactly one token", rpm, State{Tokens: 0, Last: 0, Until: 0, Reserved: 0}, 600, State{Tokens: 1000, Last: 600, Until: 0, Reserved: 0}},
		{"fills and stops at capacity", rpm, State{Tokens: 0, Last: 0, Until: 0, Reserved: 0}, 120_000, State{Tokens: 100_000, Last: 120_000, Until: 0, Reserved: 0}},
		{"exactly full", rpm, State{Tokens: 40_000, Last: 0, Until: 0, Reserved: 0}, 36_000, State{Tokens: 100_000, Last: 36_000, Until: 0, Reserved: 0}},
		{"full bucket moves its timestamp", rpm, State{Tokens: 100_000, Last: 0, Until: 0, Reserved: 0}, 5, State{Tokens: 100_000, Last: 5, Until: 0, Reserved: 0}},
		{"debt is repaid by refill", rpm, State{Tokens: -80_000, Last: 0, Until: 0, Reserved: 0}, 30_000, State{Tokens: -30_000, Last: 30_000, Until: 0, Reserved: 0}},
		// 1M tokens/min = 16666.67 milli/ms: 1 ms earns 16666 milli and uses the whole ms.
		{"fast rate keeps the fraction, not the time", fast, State{Tokens: 0, Last: 0, Until: 0, Reserved: 0}, 1, State{Tokens: 16_666, Last: 1, Until: 0, Reserved: 0}},
		{"concurrent never refills", ConcurrentSlots(3).Limits(), State{Tokens: 1000, Last: 0, Until: 0, Reserved: 0}, 99_999, State{Tokens: 1000, Last: 0, Until: 0, Reserved: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Refill(tt.l, tt.s, tt.now); got != tt.want {
				t.Errorf("Refill(%+v, %d) = %+v, want %+v", tt.s, tt.now, got, tt.want)
			}
		})
	}
}

// The rounding-down drift compensation of zae-limiter credits the same
// millisecond twice at rates above 1 millitoken/ms; ours must not.
func TestRefillNeverCreditsTimeTwice(t *testing.T) {
	l := PerPeriod(Tokens, 1_000_000, time.Minute).Limits()
	s := State{Tokens: 0, Last: 0}
	for now := int64(1); now <= 1000; now++ {
		s = Refill(l, s, now)
	}
	exact := mulDiv(1000, l.Amount, l.Period)
	if s.Tokens > exact {
		t.Fatalf("after 1000 one-ms refills got %d millitokens, more than the exact %d", s.Tokens, exact)
	}
	// Each write forgoes less than one millitoken.
	if exact-s.Tokens > 1000 {
		t.Fatalf("after 1000 writes got %d millitokens, lost %d (> 1 per write)", s.Tokens, exact-s.Tokens)
	}
}

func TestTake(t *testing.T) {
	rpm := perMinute(100)
	tests := []struct {
		name      string
		l         Limits
		s         State
		now, cost int64
		want      State
		wantRetry int64
		wantOK    bool
	}{
		{"granted from a full bucket", rpm, State{Tokens: 100_000, Last: 0, Until: 0, Reserved: 0}, 0, 1000, State{Tokens: 99_000, Last: 0, Until: 0, Reserved: 0}, 0, true},
		{"granted after refill", rpm, State{Tokens: 0, Last: 0, Until: 0, Reserved: 0}, 600, 1000, State{Tokens: 0, Last: 600, Until: 0, Reserved: 0}, 0, true},
		{"denied one ms early", rpm, State{Tokens: 0, Last: 0, Until: 0, Reserved: 0}, 599, 1000, State{Tokens: 0, Last: 0, Until: 0, Reserved: 0}, 1, false},
		{"denied from empty", rpm, State{Tokens: 0, Last: 0, Until: 0, Reserved: 0}, 0, 1000, State{Tokens: 0, Last: 0, Until: 0, Reserved: 0}, 600, false},
		{"denied in debt", rpm, State{Tokens: -100_000, Last: 0, Until: 0, Reserved: 0}, 0, 1000, State{Tokens: -100_000, Last: 0, Until: 0, Reserved: 0}, 60_600, false},
		{"clock behind the state waits the difference", rpm, State{Tokens: 0, Last: 10_000, Until: 0, Reserved: 0}, 9_000, 1000, State{Tokens: 0, Last: 10_000, Until: 0, Reserved: 0}, 1_600, false},
		{"concurrent denial has no exact wait", ConcurrentSlots(1).Limits(), State{Tokens: 0, Last: 0, Until: 0, Reserved: 0}, 5, 1000, State{Tokens: 0, Last: 0, Until: 0, Reserved: 0}, 0, false},
		{"concurrent grant", ConcurrentSlots(2).Limits(), State{Tokens: 2000, Last: 0, Until: 0, Reserved: 0}, 5, 1000, State{Tokens: 1000, Last: 0, Until: 0, Reserved: 0}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, retry, ok := Take(tt.l, tt.s, tt.now, tt.cost)
			if got != tt.want || retry != tt.wantRetry || ok != tt.wantOK {
				t.Errorf("Take(%+v, now=%d, cost=%d) = %+v, %d, %v; want %+v, %d, %v",
					tt.s, tt.now, tt.cost, got, retry, ok, tt.want, tt.wantRetry, tt.wantOK)
			}
		})
	}
}

func TestAdjust(t *testing.T) {
	tpm := PerPeriod(Tokens, 10_000, time.Minute).Limits() // max debt 10000 tokens per charge
	tests := []struct {
		name        string
		s           State
		delta       int64
		want        State
		wantApplied int64
	}{
		{"refund", State{Tokens: 1_000_000, Last: 0, Until: 0, Reserved: 0}, -700_000, State{Tokens: 1_700_000, Last: 0, Until: 0, Reserved: 0, Charged: -700_000}, -700_000},
		{"charge into debt", State{Tokens: 0, Last: 0, Until: 0, Reserved: 0}, 600_000, State{Tokens: -600_000, Last: 0, Until: 0, Reserved: 0, Charged: 600_000}, 600_000},
		{"one charge stops at the floor", State{Tokens: 1_000_000, Last: 0, Until: 0, Reserved: 0}, 15_000_000, State{Tokens: -10_000_000, Last: 0, Until: 0, Reserved: 0, Charged: 11_000_000}, 11_000_000},
		{"a second charge goes below the floor", State{Tokens: -10_000_000, Last: 0, Until: 0, Reserved: 0}, 5_000_000, State{Tokens: -15_000_000, Last: 0, Until: 0, Reserved: 0, Charged: 5_000_000}, 5_000_000},
		{"one charge adds at most the max debt", State{Tokens: -4_000_000, Last: 0, Until: 0, Reserved: 0}, 30_000_000, State{Tokens: -14_000_000, Last: 0, Until: 0, Reserved: 0, Charged: 10_000_000}, 10_000_000},
		{"a refund in deep debt keeps the rest", State{Tokens: -25_000_000, Last: 0, Until: 0, Reserved: 0}, -1_000_000, State{Tokens: -24_000_000, Last: 0, Until: 0, Reserved: 0, Charged: -1_000_000}, -1_000_000},
		{"refund stops at capacity", State{Tokens: 9_500_000, Last: 0, Until: 0, Reserved: 0}, -1_000_000, State{Tokens: 10_000_000, Last: 0, Until: 0, Reserved: 0, Charged: -500_000}, -500_000},
	}
	for _, tt := range tests {
		got, applied := Adjust(tpm, tt.s, 0, tt.delta)
		if got != tt.want || applied != tt.wantApplied {
			t.Errorf("%s: Adjust(%+v, %d) = %+v, %d; want %+v, %d", tt.name, tt.s, tt.delta, got, applied, tt.want, tt.wantApplied)
		}
	}
}

func TestRestoreAndPenalize(t *testing.T) {
	c := ConcurrentSlots(3).Limits()
	if got, capped := Restore(c, State{Tokens: 1000, Last: 7, Until: 0, Reserved: 0}, 1000); got != (State{Tokens: 2000, Last: 7, Until: 0, Reserved: 0}) || capped {
		t.Errorf("Restore below capacity = %+v, %v; want {2000 7}, false", got, capped)
	}
	if got, capped := Restore(c, State{Tokens: 2500, Last: 7, Until: 0, Reserved: 0}, 1000); got != (State{Tokens: 3000, Last: 7, Until: 0, Reserved: 0}) || !capped {
		t.Errorf("Restore over capacity = %+v, %v; want {3000 7}, true", got, capped)
	}
	rpm := perMinute(100)
	if got := Penalize(rpm, State{Tokens: 50_000, Last: 0, Until: 0, Reserved: 0}, 0, 800); got != (State{Tokens: 40_000, Last: 0, Until: 0, Reserved: 0, Charged: 10_000}) {
		t.Errorf("Penalize(0.8) = %+v, want {40000 0}", got)
	}
	if got := Penalize(rpm, State{Tokens: -5_000, Last: 0, Until: 0, Reserved: 0}, 0, 500); got != (State{Tokens: -5_000, Last: 0, Until: 0, Reserved: 0}) {
		t.Errorf("Penalize of debt = %+v, want it unchanged", got)
	}
}

func TestConcurrentRetry(t *testing.T) {
	tests := []struct{ now, earliest, poll, want int64 }{
		{0, 300, 1000, 300},
		{0, 5000, 1000, 1000},
		{10, 0, 1000, 1000},
		{10, 10, 1000, 1000},
		{10, 11, 1000, 1},
		{0, 0, 0, 1},
	}
	for _, tt := range tests {
		if got := ConcurrentRetry(tt.now, tt.earliest, tt.poll); got != tt.want {
			t.Errorf("ConcurrentRetry(%d, %d, %d) = %d, want %d", tt.now, tt.earliest, tt.poll, got, tt.want)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		c     Config
		field string
	}{
		{"ok rpm", PerPeriod(Requests, 100, time.Minute), ""},
		{"ok concurrent", ConcurrentSlots(5), ""},
		{"ok max", Config{Type: Tokens, Capacity: MaxCapacity, RefillAmount: MaxCapacity, RefillPeriod: time.Millisecond}, ""},
		{"no type", Config{Capacity: 1, RefillAmount: 1, RefillPeriod: time.Second}, "limit_type"},
		{"zero capacity", PerPeriod(Requests, 0, time.Minute), "capacity"},
		{"huge capacity", PerPeriod(Requests, MaxCapacity+1, time.Minute), "capacity"},
		{"negative cost per call", Config{Type: Requests, Capacity: 5, RefillAmount: 5, RefillPeriod: time.Second, CostPerCall: -1}, "cost_per_call"},
		{"cost per call over capacity", Config{Type: Requests, Capacity: 5, RefillAmount: 5, RefillPeriod: time.Second, CostPerCall: 6}, "cost_per_call"},
		{"concurrent with refill", Config{Type: Concurrent, Capacity: 5, RefillAmount: 5}, "refill_amount"},
		{"rpm without refill", Config{Type: Requests, Capacity: 5, RefillPeriod: time.Second}, "refill_amount"},
		{"sub-millisecond period", Config{Type: Requests, Capacity: 5, RefillAmount: 5, RefillPeriod: 1500 * time.Microsecond}, "refill_period"},
		{"period too long", Config{Type: Requests, Capacity: 5, RefillAmount: 5, RefillPeriod: 367 * 24 * time.Hour}, "refill_period"},
		{"too slow to fill", Config{Type: Tokens, Capacity: MaxCapacity, RefillAmount: 1, RefillPeriod: 24 * time.Hour}, "refill_amount"},
		{"bad debt", Config{Type: Tokens, Capacity: 5, RefillAmount: 5, RefillPeriod: time.Second, MaxDebt: -2}, "max_debt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate() = %v, want a FieldError for %q matching ErrInvalid", err, tt.field)
			}
		})
	}
}

func TestMulDivSaturates(t *testing.T) {
	if got := mulDiv(math.MaxInt64, math.MaxInt64, 1); got != math.MaxInt64 {
		t.Errorf("mulDiv overflow = %d, want MaxInt64", got)
	}
	if got := ceilMulDiv(7, 3, 2); got != 11 {
		t.Errorf("ceilMulDiv(7,3,2) = %d, want 11", got)
	}
	if got := mulDiv(1e15, 3e10, 1e15); got != 3e10 {
		t.Errorf("mulDiv(1e15,3e10,1e15) = %d, want 3e10", got)
	}
}

func TestParseType(t *testing.T) {
	for _, ty := range []LimitType{Requests, Tokens, Concurrent} {
		got, err := ParseType(ty.String())
		if err != nil || got != ty {
			t.Errorf("ParseType(%q) = %v, %v; want %v", ty.String(), got, err, ty)
		}
	}
	if _, err := ParseType("rpm"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseType(\"rpm\") error = %v, want ErrInvalid", err)
	}
}

func BenchmarkTake(b *testing.B) {
	l := perMinute(1_000_000_000)
	s := State{Tokens: l.Capacity, Last: 0}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		var ok bool
		s, _, ok = Take(l, s, int64(i), 1000)
		if !ok {
			s.Tokens = l.Capacity
		}
	}
}

func TestReconfigure(t *testing.T) {
	c5, c10 := ConcurrentSlots(5).Limits(), ConcurrentSlots(10).Limits()
	rpm100, rpm50 := perMinute(100), perMinute(50)
	tests := []struct {
		name      string
		old, next Limits
		s         State
		now       int64
		reset     bool
		want      State
	}{
		{"concurrent raise frees the new slots", c5, c10, State{Tokens: 0, Last: 0, Until: 0, Reserved: 0}, 9, false, State{Tokens: 5000, Last: 0, Until: 0, Reserved: 0}},
		{"concurrent lower goes below zero", c10, c5, State{Tokens: 2000, Last: 0, Until: 0, Reserved: 0}, 9, false, State{Tokens: -3000, Last: 0, Until: 0, Reserved: 0}},
		{"reset fills whatever is held", c10, c5, State{Tokens: 0, Last: 0, Until: 0, Reserved: 0}, 9, true, State{Tokens: 5000, Last: 9, Until: 0, Reserved: 0}},
		{"time-based keeps the refilled balance", rpm100, rpm50, State{Tokens: 30_000, Last: 0, Until: 0, Reserved: 0}, 600, false, State{Tokens: 31_000, Last: 600, Until: 0, Reserved: 0}},
		{"time-based clamps to the new capacity", rpm100, rpm50, State{Tokens: 90_000, Last: 0, Until: 0, Reserved: 0}, 0, false, State{Tokens: 50_000, Last: 0, Until: 0, Reserved: 0}},
		{"concurrent to time-based clamps", c10, rpm50, State{Tokens: -1000, Last: 0, Until: 0, Reserved: 0}, 0, false, State{Tokens: -1000, Last: 0, Until: 0, Reserved: 0}},
		// Debt is usage that happened: a lower limit (and so a higher
		// floor) never forgives it.
		{"lowering keeps debt below the new floor", rpm100, rpm50, State{Tokens: -80_000, Last: 0, Until: 0, Reserved: 0}, 0, false, State{Tokens: -80_000, Last: 0, Until: 0, Reserved: 0}},
		{"lowering keeps debt, refilled under the old limits", rpm100, rpm50, State{Tokens: -80_000, Last: 0, Until: 0, Reserved: 0}, 600, false, State{Tokens: -79_000, Last: 600, Until: 0, Reserved: 0}},
	}
	for _, tt := range tests {
		if got := Reconfigure(tt.old, tt.next, tt.s, tt.now, tt.reset); got != tt.want {
			t.Errorf("%s: Reconfigure(%+v) = %+v, want %+v", tt.name, tt.s, got, tt.want)
		}
	}
}

func TestCooldown(t *testing.T) {
	rpm := PerPeriod(Requests, 100, time.Minute).Limits() // 1 token per 600 ms
	tests := []struct {
		name       string
		s          State
		now, until int64
		want       State
	}{
		{"full bucket drops to zero", State{Tokens: 100_000, Last: 0, Until: 0, Reserved: 0}, 1000, 5000, State{Tokens: 0, Last: 1000, Until: 5000, Reserved: 0, Charged: 106_667}},
		{"debt is kept", State{Tokens: -30_000, Last: 0, Until: 0, Reserved: 0}, 0, 5000, State{Tokens: -30_000, Last: 0, Until: 5000, Reserved: 0, Charged: 8334}},
		{"refilled first", State{Tokens: 0, Last: 0, Until: 0, Reserved: 0}, 600, 5000, State{Tokens: 0, Last: 600, Until: 5000, Reserved: 0, Charged: 8334}},
		{"a later end wins", State{Tokens: 0, Last: 0, Until: 9000, Reserved: 0}, 100, 5000, State{Tokens: 0, Last: 0, Until: 9000, Reserved: 0}},
		{"an earlier running cooldown is extended", State{Tokens: 0, Last: 0, Until: 3000, Reserved: 0}, 100, 5000, State{Tokens: 0, Last: 0, Until: 5000, Reserved: 0, Charged: 3334}},
		{"until at now only refills", State{Tokens: 50_000, Last: 0, Until: 0, Reserved: 0}, 600, 600, State{Tokens: 51_000, Last: 600, Until: 0, Reserved: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Cooldown(rpm, tt.s, tt.now, tt.until); got != tt.want {
				t.Errorf("Cooldown(%+v, %d, %d) = %+v, want %+v", tt.s, tt.now, tt.until, got, tt.want)
			}
		})
	}
}

func TestCooldownGrantsNothingBeforeUntilThenResumesAtRate(t *testing.T) {
	rpm := PerPeriod(Requests, 100, time.Minute).Limits()
	s := Cooldown(rpm, State{Tokens: 100_000}, 0, 5000)
	if _, wait, ok := Take(rpm, s, 4999, 1000); ok || wait != 601 {
		t.Fatalf("Take at 4999 = granted %v, wait %d; want denied, wait 601 (until 5000 + 600 ms to earn one)", ok, wait)
	}
	if got := Available(rpm, s, 5000); got != 0 {
		t.Errorf("Available at until = %d, want 0 (nothing earned during the cooldown)", got)
	}
	if _, _, ok := Take(rpm, s, 5599, 1000); ok {
		t.Fatal("Take at 5599 granted; the first token is earned at 5600")
	}
	s2, _, ok := Take(rpm, s, 5600, 1000)
	if !ok {
		t.Fatal("Take at 5600 denied; want granted at the refill rate after the cooldown")
	}
	if _, wait, ok := Take(rpm, s2, 5600, 1000); ok || wait != 600 {
		t.Errorf("second Take at 5600 = %v, wait %d; want denied, 600 (no burst)", ok, wait)
	}
}

func TestCooldownRefundLiftsAtMostToZero(t *testing.T) {
	rpm := PerPeriod(Requests, 100, time.Minute).Limits()
	s := Cooldown(rpm, State{Tokens: -5000}, 0, 5000)
	got, applied := Adjust(rpm, s, 100, -50_000)
	if want := (State{Tokens: 0, Last: 0, Until: 5000, Reserved: 0, Charged: 3334}); got != want || applied != -5000 {
		t.Errorf("refund during cooldown = %+v, applied %d; want %+v, -5000", got, applied, want)
	}
	got, applied = Adjust(rpm, s, 5000, -50_000)
	if want := (State{Tokens: 45_000, Last: 0, Until: 5000, Reserved: 0, Charged: -41_666}); got != want || applied != -50_000 {
		t.Errorf("refund at until = %+v, applied %d; want %+v, -50000", got, applied, want)
	}
}

func TestSync(t *testing.T) {
	rpm := PerPeriod(Requests, 100, time.Minute).Limits()
	tests := []struct {
		name     string
		s        State
		now, rem int64
		want     State
	}{
		{"lowers", State{Tokens: 100_000, Last: 0, Until: 0, Reserved: 0}, 0, 40_000, State{Tokens: 40_000, Last: 0, Until: 0, Reserved: 0, Charged: 60_000}},
		{"never raises", State{Tokens: 10_000, Last: 0, Until: 0, Reserved: 0}, 0, 40_000, State{Tokens: 10_000, Last: 0, Until: 0, Reserved: 0}},
		{"refills first", State{Tokens: 0, Last: 0, Until: 0, Reserved: 0}, 6000, 5000, State{Tokens: 5000, Last: 6000, Until: 0, Reserved: 0, Charged: 5000}},
		{"refilled balance below remaining stays", State{Tokens: 0, Last: 0, Until: 0, Reserved: 0}, 6000, 20_000, State{Tokens: 10_000, Last: 6000, Until: 0, Reserved: 0}},
		{"zero empties", State{Tokens: 100_000, Last: 0, Until: 0, Reserved: 0}, 0, 0, State{Tokens: 0, Last: 0, Until: 0, Reserved: 0, Charged: 100_000}},
		{"debt stays", State{Tokens: -1000, Last: 0, Until: 0, Reserved: 0}, 0, 0, State{Tokens: -1000, Last: 0, Until: 0, Reserved: 0}},
		{"keeps a cooldown", State{Tokens: 0, Last: 0, Until: 9000, Reserved: 0}, 100, 0, State{Tokens: 0, Last: 0, Until: 9000, Reserved: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Sync(rpm, tt.s, tt.now, tt.rem); got != tt.want {
				t.Errorf("Sync(%+v, %d, %d) = %+v, want %+v", tt.s, tt.now, tt.rem, got, tt.want)
			}
		})
	}
}
