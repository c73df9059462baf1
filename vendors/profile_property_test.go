package vendors

import (
	"fmt"
	"math"
	"math/big"
	"testing"
	"time"
)

// This file checks that no profile is ever more permissive than the vendor
// rules Sluice models. The oracle below is written from those rules alone,
// not from the profile code: a vendor bucket of capacity Cv refilled at
// Rv per minute admits at most Cv + Rv·w in any window w; a count reset
// each calendar window W admits at most N in each, so N·ceil(w/W) in a
// window of length w starting at a boundary.

// ms is a rational number of milliseconds.
func ms(w int64) *big.Rat { return new(big.Rat).SetInt64(w) }

// admitted is the most a profile's bucket admits in a window of w
// milliseconds: its capacity plus what it refills in w.
func admitted(d Dimension, w int64) *big.Rat {
	c := d.Config
	r := new(big.Rat).SetFrac64(c.RefillAmount, c.RefillPeriod.Milliseconds())
	return r.Add(r.Mul(r, ms(w)), new(big.Rat).SetInt64(c.Capacity))
}

// ceilDiv returns ceil(a/b) for a ≥ 0, b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// vendorMax is the most the vendor admits in a window of w milliseconds
// (for fixed windows, one starting at a calendar boundary: the binding
// case), for a limit of n on metric m. whole reports that the metric
// counts whole units, so that a bucket admitting x admits floor(x).
func vendorMax(t *testing.T, v Vendor, m Metric, n, w int64) (max *big.Rat, whole bool) {
	minute, dayMs := time.Minute.Milliseconds(), (24 * time.Hour).Milliseconds()
	bucketOf := func(cap *big.Rat, perMs *big.Rat) *big.Rat {
		x := new(big.Rat).Mul(perMs, ms(w))
		return x.Add(x, cap)
	}
	perMinute := new(big.Rat).SetFrac64(n, minute)
	perDay := new(big.Rat).SetFrac64(n, dayMs)
	full := new(big.Rat).SetInt64(n)
	oneSecond := new(big.Rat).SetFrac64(n, 60) // RPM/60
	if oneSecond.Cmp(big.NewRat(1, 1)) < 0 {
		oneSecond = big.NewRat(1, 1)
	}
	switch {
	case m == Concurrent:
		return full, true
	case v == Azure && m == Tokens: // calendar minute, reset each minute
		return new(big.Rat).SetInt64(n * ceilDiv(max64(w, 1), minute)), true
	case v == Azure && m == Requests: // ceil(RPM/60) per calendar second, RPM per minute
		k := ceilDiv(n, 60)
		perSecond := k * ceilDiv(max64(w, 1), 1000)
		perMin := n * ceilDiv(max64(w, 1), minute)
		return new(big.Rat).SetInt64(min(perSecond, perMin)), true
	case v == Gemini && m == RequestsPerDay: // calendar day at midnight Pacific: up to 25 h long
		return new(big.Rat).SetInt64(n * ceilDiv(max64(w, 1), 25*time.Hour.Milliseconds())), true
	case m == Requests: // Anthropic (published), OpenAI, Gemini, Groq (read as a bucket)
		return bucketOf(oneSecond, perMinute), true
	case m == Tokens || m == InputTokens || m == OutputTokens:
		return bucketOf(full, perMinute), true
	case m == RequestsPerDay || m == TokensPerDay: // OpenAI, Groq: Bucket(N, N per day)
		return bucketOf(full, perDay), true
	}
	t.Fatalf("no vendor rule for %s %s", v, m)
	return nil, false
}

func max64(a, b int64) int64 { return max(a, b) }

// windows returns a dense set of window lengths in milliseconds: every
// thirty-second of a second, a minute, a day and a Pacific long day, up
// to three of each, and one millisecond either side of every boundary.
func windows() []int64 {
	set := map[int64]bool{0: true, 1: true, 2: true, 10: true, 999: true}
	for _, s := range []int64{1000, 60_000, 86_400_000, 90_000_000} {
		for k := int64(0); k <= 3*32; k++ {
			set[k*s/32] = true
		}
		for k := int64(1); k <= 4; k++ {
			set[k*s-1], set[k*s], set[k*s+1] = true, true, true
		}
	}
	out := make([]int64, 0, len(set))
	for w := range set {
		out = append(out, w)
	}
	return out
}

// checkNeverMorePermissive fails if any dimension of p admits, in any of
// the windows, more than its vendor's rule.
func checkNeverMorePermissive(t *testing.T, p Profile, ws []int64) {
	t.Helper()
	for _, d := range p.Dimensions {
		if d.Metric == Concurrent {
			if d.Config.Capacity > d.Limit {
				t.Errorf("%s: %d slots above the vendor's %d", d.Name, d.Config.Capacity, d.Limit)
			}
			continue
		}
		for _, w := range ws {
			if clearlyBelow(p.Vendor, d, w) {
				continue
			}
			vm, whole := vendorMax(t, p.Vendor, d.Metric, d.Limit, w)
			got := admitted(d, w)
			if whole { // whole units: the bucket admits floor(got)
				f := new(big.Int).Quo(got.Num(), got.Denom())
				got = new(big.Rat).SetInt(f)
			}
			if got.Cmp(vm) > 0 {
				t.Fatalf("%s (limit %d, headroom %g, %+v): admits %s in %v, the vendor at most %s",
					d.Name, d.Limit, p.Headroom, d.Config, got.FloatString(3), time.Duration(w)*time.Millisecond, vm.FloatString(3))
			}
		}
	}
}

// clearlyBelow is a fast path in floating point: true when the bucket's
// admission in w is below the vendor's by a margin no rounding error can
// close. Anything else is decided exactly, in rationals.
func clearlyBelow(v Vendor, d Dimension, w int64) bool {
	c := d.Config
	got := float64(c.Capacity) + float64(c.RefillAmount)*float64(w)/float64(c.RefillPeriod.Milliseconds())
	n, fw := float64(d.Limit), float64(w)
	var vm float64
	w1 := float64(max(w, 1))
	switch {
	case v == Azure && d.Metric == Tokens:
		vm = n * math.Ceil(w1/60_000)
	case v == Azure && d.Metric == Requests:
		vm = min(math.Ceil(n/60)*math.Ceil(w1/1000), n*math.Ceil(w1/60_000))
	case v == Gemini && d.Metric == RequestsPerDay:
		vm = n * math.Ceil(w1/90_000_000)
	case d.Metric == Requests:
		vm = max(1, n/60) + n*fw/60_000
	case d.Metric == RequestsPerDay || d.Metric == TokensPerDay:
		vm = n + n*fw/86_400_000
	default:
		vm = n + n*fw/60_000
	}
	return got < vm*(1-1e-9)-1e-6
}

type ctor struct {
	vendor Vendor
	make   func(n int64, opts ...ProfileOption) (Profile, error)
}

// ctors builds every profile with every limit set to n (Azure's RPM from
// its TPM ratio, then set explicitly too).
func ctors() []ctor {
	return []ctor{
		{OpenAI, func(n int64, o ...ProfileOption) (Profile, error) {
			return OpenAIProfile(OpenAILimits{Model: "m", RPM: n, TPM: n, RPD: n, TPD: n}, o...)
		}},
		{Anthropic, func(n int64, o ...ProfileOption) (Profile, error) {
			return AnthropicProfile(AnthropicLimits{RPM: n, InputTPM: n, OutputTPM: n}, o...)
		}},
		{Azure, func(n int64, o ...ProfileOption) (Profile, error) {
			return AzureProfile(AzureLimits{Deployment: "d", TPM: n * 1000}, o...)
		}},
		{Azure, func(n int64, o ...ProfileOption) (Profile, error) {
			return AzureProfile(AzureLimits{TPM: n, RPM: n}, o...)
		}},
		{Gemini, func(n int64, o ...ProfileOption) (Profile, error) {
			return GeminiProfile(GeminiLimits{RPM: n, TPM: n, RPD: n}, o...)
		}},
		{Groq, func(n int64, o ...ProfileOption) (Profile, error) {
			return GroqProfile(GroqLimits{RPM: n, RPD: n, TPM: n, TPD: n, InputTPM: n, OutputTPM: n}, o...)
		}},
		{ElevenLabs, func(n int64, o ...ProfileOption) (Profile, error) {
			return ElevenLabsProfile(ElevenLabsLimits{Concurrent: n}, o...)
		}},
	}
}

// TestNeverMorePermissive sweeps limits, headrooms and bursts over every
// profile and checks each resulting bucket against the vendor's rule in a
// dense set of windows, and, for the fixed windows, the closed form:
// capacity + refill per window ≤ the window's limit.
func TestNeverMorePermissive(t *testing.T) {
	ws := windows()
	limits := []int64{1, 2, 3, 7, 59, 60, 61, 119, 121, 180, 500, 601, 3500, 30_000, 2_000_000, 1_000_000_000_000}
	headrooms := []float64{0, 0.000001, 0.02, 0.1, 1.0 / 3, 0.5}
	bursts := []int64{1, 2, 3, 9, 5000}
	if testing.Short() { // a quarter of the sweep
		limits = []int64{1, 7, 60, 61, 180, 500, 30_000, 1_000_000_000_000}
		headrooms = []float64{0, 0.02, 0.5}
	}
	built, refused := 0, 0
	for _, c := range ctors() {
		for _, n := range limits {
			for _, h := range headrooms {
				opts := [][]ProfileOption{{WithHeadroom(h)}}
				for _, b := range bursts {
					for _, m := range []Metric{Requests, Tokens, OutputTokens, RequestsPerDay, Concurrent} {
						opts = append(opts, []ProfileOption{WithHeadroom(h), WithBurst(m, b)})
					}
				}
				for _, o := range opts {
					p, err := c.make(n, o...)
					if err != nil {
						refused++
						continue
					}
					built++
					checkNeverMorePermissive(t, p, ws)
					checkFixedWindowClosedForm(t, p)
				}
			}
		}
	}
	t.Logf("%d profiles checked in %d windows each; %d option sets refused", built, len(ws), refused)
	if built < 500 {
		t.Fatalf("only %d profiles built: the sweep is not exercising the profiles", built)
	}
}

// checkFixedWindowClosedForm checks C + R ≤ N for Azure's calendar-minute
// TPM and Gemini's daily RPD (R per window, N the window's limit).
func checkFixedWindowClosedForm(t *testing.T, p Profile) {
	t.Helper()
	for _, d := range p.Dimensions {
		if d.Rule.Kind != FixedWindow || d.Metric == Requests {
			continue
		}
		perWindow := new(big.Rat).SetFrac64(d.Config.RefillAmount*d.Window.Milliseconds(), d.Config.RefillPeriod.Milliseconds())
		if d.Metric == RequestsPerDay { // the longest Pacific day
			perWindow = new(big.Rat).SetFrac64(d.Config.RefillAmount*25, 25)
		}
		total := perWindow.Add(perWindow, new(big.Rat).SetInt64(d.Config.Capacity))
		if total.Cmp(new(big.Rat).SetInt64(d.Limit)) > 0 {
			t.Fatalf("%s: C + R = %s > N = %d", d.Name, total.FloatString(3), d.Limit)
		}
	}
}

// TestMaxBurstAccepted checks that WithBurst refuses exactly the bursts
// that would make a bucket more permissive: the largest accepted burst
// passes the property and one more is refused.
func TestMaxBurstAccepted(t *testing.T) {
	ws := windows()
	for _, c := range ctors() {
		for _, n := range []int64{1, 7, 60, 180, 500, 30_000} {
			base, err := c.make(n)
			if err != nil {
				continue
			}
			for _, d := range base.Dimensions {
				if d.Metric == Concurrent {
					if _, err := c.make(n, WithBurst(Concurrent, n+1)); err == nil {
						t.Errorf("%s: %d slots accepted above the vendor's %d", d.Name, n+1, n)
					}
					continue
				}
				lo, hi := int64(1), int64(4*n+10) // find the largest accepted burst
				if _, err := c.make(n, WithBurst(d.Metric, lo)); err != nil {
					t.Fatalf("%s: burst 1 refused: %v", d.Name, err)
				}
				for lo < hi {
					mid := (lo + hi + 1) / 2
					if _, err := c.make(n, WithBurst(d.Metric, mid)); err == nil {
						lo = mid
					} else {
						hi = mid - 1
					}
				}
				p, _ := c.make(n, WithBurst(d.Metric, lo))
				checkNeverMorePermissive(t, p, ws)
				// One more unit of capacity with the same refill breaks the
				// rule (or Validate): the bound is tight.
				dd, _ := dimension(p, d.Metric)
				dd.Config.Capacity++
				tight := false
				for _, w := range ws {
					vm, _ := vendorMax(t, p.Vendor, dd.Metric, dd.Limit, w)
					got := admitted(dd, w)
					f := new(big.Int).Quo(got.Num(), got.Denom())
					if new(big.Rat).SetInt(f).Cmp(vm) > 0 {
						tight = true
						break
					}
				}
				if !tight && dd.Rule.Kind != FixedWindow {
					t.Errorf("%s (limit %d): burst %d accepted but %d would still be safe", dd.Name, n, lo, lo+1)
				}
			}
		}
	}
}

func dimension(p Profile, m Metric) (Dimension, error) {
	for _, d := range p.Dimensions {
		if d.Metric == m {
			return d, nil
		}
	}
	return Dimension{}, fmt.Errorf("no %s", m)
}
