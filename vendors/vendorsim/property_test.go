package vendorsim

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// event is one admitted request, seen from outside the Sim.
type event struct {
	at       time.Duration // since the start
	uncached int64         // Anthropic: input less cache reads
	charge   int64         // Azure: input + max_tokens
}

// windowBound checks that in every window [a, b] of admitted events the
// units sum to at most C + R·(b−a), for Bucket(C, R per minute) with
// C = max(1, R·burst/1min), in exact integer arithmetic.
func windowBound(t *testing.T, name string, evs []event, units func(event) int64, rate int64, burst time.Duration) {
	t.Helper()
	const p = int64(time.Minute)
	capScaled := max(p, rate*int64(burst))
	for i := range evs {
		var sum int64
		for j := i; j < len(evs); j++ {
			sum += units(evs[j])
			if dt := int64(evs[j].at - evs[i].at); sum*p > capScaled+rate*dt {
				t.Fatalf("%s: %d units admitted in [%v, %v], more than Bucket(max(1, %d·%v/1m), %d/min) allows",
					name, sum, evs[i].at, evs[j].at, rate, burst, rate)
			}
		}
	}
}

// TestNeverAdmitsMoreThanTheRule sends random request sequences, with
// random pauses and limit reductions, and checks from outside that the
// admitted requests never exceed the rule in any window, and that the
// accounting never counts more than the allowance plus the debt the rule
// permits.
func TestNeverAdmitsMoreThanTheRule(t *testing.T) {
	for seed := range uint64(30) {
		for _, v := range []Vendor{OpenAI, Anthropic, Azure} {
			t.Run(fmt.Sprintf("%s/%d", v, seed), func(t *testing.T) { propertyRun(t, v, seed) })
		}
	}
}

func propertyRun(t *testing.T, v Vendor, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	lim := Limits{RPM: 30 + r.Int64N(600)}
	switch v {
	case Anthropic:
		lim.ITPM, lim.OTPM = 500+r.Int64N(5000), 200+r.Int64N(2000)
	default:
		lim.TPM = 500 + r.Int64N(5000)
	}
	s, clk := newSim(t, Config{Vendor: v, Limits: lim, Seed: seed})
	var evs []event
	var elapsed time.Duration
	for range 250 {
		switch r.IntN(10) {
		case 0:
			d := time.Duration(r.Int64N(int64(3 * time.Second)))
			clk.Add(d)
			elapsed += d
		case 1:
			if err := s.ScaleLimits(0.1+0.9*r.Float64(), time.Duration(r.Int64N(int64(5*time.Second)))+1); err != nil {
				t.Fatal(err)
			}
		default:
			d := time.Duration(r.Int64N(int64(50 * time.Millisecond)))
			clk.Add(d)
			elapsed += d
		}
		in, maxTok, out := 1+r.IntN(300), 1+r.IntN(600), r.IntN(700)
		hdr := []string{HeaderOutputTokens, strconv.Itoa(out)}
		var w interface{ Result() *http.Response }
		var e event
		if v == Anthropic {
			cached := r.IntN(in)
			hdr = append(hdr, HeaderCacheReadTokens, strconv.Itoa(cached))
			w = post(t, s, PathMessages, messagesBody(in, maxTok), hdr...)
			e.uncached = int64(in - cached)
		} else {
			w = post(t, s, PathChatCompletions, chatBody(in, maxTok), hdr...)
			e.charge = int64(in + maxTok)
		}
		switch code := w.Result().StatusCode; code {
		case http.StatusOK:
			e.at = elapsed
			evs = append(evs, e)
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("status %d", code)
		}
	}
	one := func(event) int64 { return 1 }
	st := s.Stats()
	switch v {
	case Azure:
		checkAzure(t, evs, lim)
	case Anthropic:
		windowBound(t, "requests", evs, one, lim.RPM, time.Second)
		windowBound(t, "input tokens", evs, func(e event) int64 { return e.uncached }, lim.ITPM, time.Minute)
	default:
		windowBound(t, "requests", evs, one, lim.RPM, time.Second)
	}
	if st.Admitted != int64(len(evs)) {
		t.Errorf("Stats.Admitted = %d, the client saw %d", st.Admitted, len(evs))
	}
	for _, m := range st.Metrics {
		if m.Counted > m.Allowance+m.Debt {
			t.Errorf("%s: counted %d > allowance %d + debt %d", m.Metric, m.Counted, m.Allowance, m.Debt)
		}
		if m.Debt > 0 && (m.Metric == MetricRequests || m.Metric == MetricInputTokens) {
			t.Errorf("%s: debt %d, but this limit never goes into debt", m.Metric, m.Debt)
		}
	}
}

// checkAzure checks the calendar windows: at most ceil(RPM/60) requests
// in a calendar second, at most TPM tokens charged in a calendar minute.
func checkAzure(t *testing.T, evs []event, lim Limits) {
	t.Helper()
	perSecond := (lim.TPM*6/1000 + 59) / 60
	if lim.RPM > 0 {
		perSecond = (lim.RPM + 59) / 60
	}
	secs, mins := map[int64]int64{}, map[int64]int64{}
	for _, e := range evs {
		// epoch is a minute boundary, so offsets give the calendar windows.
		secs[int64(e.at/time.Second)]++
		mins[int64(e.at/time.Minute)] += e.charge
	}
	for k, n := range secs {
		if n > perSecond {
			t.Fatalf("second %d: %d requests, more than %d", k, n, perSecond)
		}
	}
	for k, n := range mins {
		if n > lim.TPM {
			t.Fatalf("minute %d: %d tokens charged, more than %d", k, n, lim.TPM)
		}
	}
}
