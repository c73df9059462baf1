package verify

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

var t0 = time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)

func at(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func ev(ms int64, dim string, k Kind, tokens int64) Event {
	return Event{Time: at(ms), Dimension: dim, Kind: k, Milli: tokens * bucket.Milli}
}

func grants(ms int64, dim string, n int, cost int64) []Event {
	out := make([]Event, n)
	for i := range out {
		out[i] = ev(ms, dim, Grant, cost)
	}
	return out
}

// tenPerSecond holds 10 and refills one token every 100 ms.
var tenPerSecond = store.Bucket{Name: "api#rps", Config: bucket.PerPeriod(bucket.Requests, 10, time.Second)}

func check(t *testing.T, in Input) *Dimension {
	t.Helper()
	r, err := Check(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Dimensions) != 1 {
		t.Fatalf("got %d dimensions", len(r.Dimensions))
	}
	return &r.Dimensions[0]
}

func TestExactBurstAndRefillIsWithinBound(t *testing.T) {
	evs := grants(0, "api#rps", 10, 1)
	evs = append(evs, ev(100, "api#rps", Grant, 1), ev(200, "api#rps", Grant, 1))
	d := check(t, Input{Buckets: []store.Bucket{tenPerSecond}, Events: evs, Start: at(0), End: at(200)})
	if !d.OK() || d.Exceeded {
		t.Fatalf("exceeded: %+v", d)
	}
	if d.WorstExcess != 0 {
		t.Errorf("worst excess = %d, want 0 (the bucket was used exactly to its bound)", d.WorstExcess)
	}
	if d.Grants != 12 || d.Consumed != 12_000 || d.Allowed != 12_000 || d.Utilisation != 1 {
		t.Errorf("grants %d consumed %d allowed %d util %v", d.Grants, d.Consumed, d.Allowed, d.Utilisation)
	}
}

// TestOverAdmissionIsCaught feeds logs of a store that admitted too much.
func TestOverAdmissionIsCaught(t *testing.T) {
	cases := map[string]struct {
		evs  []Event
		want int64 // worst excess, millitokens
	}{
		"burst above capacity": {grants(0, "api#rps", 11, 1), 1000},
		"refill too fast": {append(grants(0, "api#rps", 10, 1),
			ev(50, "api#rps", Grant, 1), ev(100, "api#rps", Grant, 1)), 1000},
		"late in a long run": {append(append(grants(0, "api#rps", 10, 1),
			grants(5_000, "api#rps", 10, 1)...), ev(5_000, "api#rps", Grant, 1)), 1000},
		"granted while in settlement debt": {[]Event{
			ev(0, "api#rps", Grant, 10), ev(50, "api#rps", Settle, 5), ev(100, "api#rps", Grant, 1),
		}, 5000},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			d := check(t, Input{Buckets: []store.Bucket{tenPerSecond}, Events: c.evs})
			if !d.Exceeded || d.OK() {
				t.Fatalf("over-admission not caught: %+v", d)
			}
			if d.WorstExcess != c.want {
				t.Errorf("worst excess = %d, want %d", d.WorstExcess, c.want)
			}
		})
	}
}

func TestSettlementDebtWithoutLaterGrantIsNotAnAdmission(t *testing.T) {
	evs := []Event{ev(0, "api#rps", Grant, 10), ev(50, "api#rps", Settle, 5)}
	d := check(t, Input{Buckets: []store.Bucket{tenPerSecond}, Events: evs})
	if d.Exceeded {
		t.Fatalf("debt from a settlement flagged as over-admission: %+v", d)
	}
	if d.Charged != 5000 || d.Consumed != 15_000 || d.MaxWindow != 15_000 {
		t.Errorf("charged %d consumed %d max window %d", d.Charged, d.Consumed, d.MaxWindow)
	}
	// Once the debt is repaid (500 ms of refill), a grant is legitimate.
	evs = append(evs, ev(650, "api#rps", Grant, 1))
	if d := check(t, Input{Buckets: []store.Bucket{tenPerSecond}, Events: evs}); d.Exceeded {
		t.Fatalf("grant after the debt was repaid flagged: %+v", d)
	}
}

func TestRefundMakesRoom(t *testing.T) {
	evs := []Event{ev(0, "api#rps", Grant, 10), ev(10, "api#rps", Settle, -4), ev(10, "api#rps", Grant, 4)}
	d := check(t, Input{Buckets: []store.Bucket{tenPerSecond}, Events: evs})
	if d.Exceeded || d.Refunded != 4000 || d.Consumed != 10_000 {
		t.Fatalf("%+v", d)
	}
}

func TestSlackWidensWindows(t *testing.T) {
	evs := append(grants(0, "api#rps", 10, 1), ev(50, "api#rps", Grant, 1))
	if d := check(t, Input{Buckets: []store.Bucket{tenPerSecond}, Events: evs}); !d.Exceeded {
		t.Fatal("want exceeded without slack")
	}
	d := check(t, Input{Buckets: []store.Bucket{tenPerSecond}, Events: evs, Slack: 50 * time.Millisecond})
	if d.Exceeded {
		t.Fatalf("want within bound with 50ms slack: %+v", d)
	}
}

func TestConcurrent(t *testing.T) {
	b := store.Bucket{Name: "tts#concurrent", Config: bucket.ConcurrentSlots(3)}
	ok := append(grants(0, b.Name, 3, 1), ev(100, b.Name, Release, 1), ev(100, b.Name, Grant, 1),
		ev(200, b.Name, Release, 1), ev(200, b.Name, Release, 1), ev(200, b.Name, Release, 1))
	d := check(t, Input{Buckets: []store.Bucket{b}, Events: ok, Start: at(0), End: at(400)})
	if !d.OK() || d.PeakInFlight != 3000 || d.WorstExcess != 0 || d.Grants != 4 {
		t.Fatalf("%+v", d)
	}
	if d.Utilisation != 0.5 { // 3 slots for 200 ms of 400
		t.Errorf("utilisation = %v, want 0.5", d.Utilisation)
	}
	// Release and grant at the same instant, in the wrong order: 4 held.
	bad := append(grants(0, b.Name, 3, 1), ev(100, b.Name, Grant, 1), ev(100, b.Name, Release, 1))
	d = check(t, Input{Buckets: []store.Bucket{b}, Events: bad})
	if !d.Exceeded || d.PeakInFlight != 4000 || d.WorstExcess != 1000 {
		t.Fatalf("over-admission not caught: %+v", d)
	}
	d = check(t, Input{Buckets: []store.Bucket{b}, Events: []Event{ev(0, b.Name, Release, 1)}})
	if d.OK() || len(d.Problems) != 1 {
		t.Fatalf("release with nothing held not reported: %+v", d)
	}
}

func TestErrors(t *testing.T) {
	if _, err := Check(Input{Buckets: []store.Bucket{tenPerSecond}, Events: []Event{ev(0, "nope", Grant, 1)}}); err == nil ||
		!strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown dimension: %v", err)
	}
	if _, err := Check(Input{Buckets: []store.Bucket{tenPerSecond, tenPerSecond}}); err == nil {
		t.Error("duplicate bucket accepted")
	}
	if _, err := Check(Input{Buckets: []store.Bucket{{Name: "x"}}}); err == nil {
		t.Error("invalid bucket accepted")
	}
}

// simulate drives the real bucket math with random grants and settlements
// (into debt and back) and logs what it applied. cheat adds refill the
// bucket should not have, to make it over-admit.
func simulate(rng *rand.Rand, l bucket.Limits, name string, cheat int64) []Event {
	s := bucket.State{Tokens: l.Capacity, Last: t0.UnixMilli()}
	var evs []Event
	now := t0.UnixMilli()
	for range 5000 {
		now += rng.Int64N(20)
		if cheat > 0 && rng.IntN(50) == 0 {
			s = bucket.Refill(l, s, now)
			s.Tokens = min(l.Capacity, s.Tokens+cheat)
		}
		cost := (1 + rng.Int64N(30)) * bucket.Milli
		st, _, ok := bucket.Take(l, s, now, cost)
		if !ok {
			continue
		}
		s = st
		evs = append(evs, Event{Time: time.UnixMilli(now), Dimension: name, Kind: Grant, Milli: cost})
		if rng.IntN(2) == 0 { // settle: -50% .. +50%
			delta := (cost / bucket.Milli) * (rng.Int64N(101) - 50) / 100
			if delta != 0 {
				var applied int64
				now += rng.Int64N(5)
				s, applied = bucket.Adjust(l, s, now, delta*bucket.Milli)
				evs = append(evs, Event{Time: time.UnixMilli(now), Dimension: name, Kind: Settle, Milli: applied})
			}
		}
	}
	return evs
}

func TestRealBucketMathPassesAndCheatingFails(t *testing.T) {
	b := store.Bucket{Name: "api#tpm", Config: bucket.PerPeriod(bucket.Tokens, 1000, 7*time.Second)}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		d := check(t, Input{Buckets: []store.Bucket{b}, Events: simulate(rng, b.Config.Limits(), b.Name, 0)})
		if !d.OK() {
			t.Fatalf("seed %d: correct bucket flagged: excess %d in [%s, %s]", seed, d.WorstExcess, d.WorstFrom, d.WorstTo)
		}
		if d.WorstExcess < -1000 {
			t.Errorf("seed %d: worst margin %d: the bucket was never saturated; the test proves little", seed, d.WorstExcess)
		}
		rng = rand.New(rand.NewPCG(seed, 1))
		d = check(t, Input{Buckets: []store.Bucket{b}, Events: simulate(rng, b.Config.Limits(), b.Name, 5*bucket.Milli)})
		if !d.Exceeded {
			t.Fatalf("seed %d: a bucket crediting 5 extra tokens now and then was not caught (excess %d)", seed, d.WorstExcess)
		}
	}
}

// A verdict prints its bucket configuration as the command line's other
// JSON does: snake_case keys, the type as a word, the period as a string.
func TestDimensionJSON(t *testing.T) {
	d := Dimension{Name: "v#tpm", Config: bucket.PerPeriod(bucket.Tokens, 600, 1500*time.Millisecond), Grants: 3}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"name":"v#tpm"`, `"grants":3`,
		`"config":{"type":"tokens","capacity":600,"refill_amount":600,"refill_period":"1.5s","cost_per_call":1,"max_debt":600}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("got %s\nwant it to contain %s", b, want)
		}
	}
	var back Dimension
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if got, want := back.Config.Limits(), d.Config.Limits(); back.Name != d.Name || back.Grants != 3 || got != want {
		t.Errorf("round trip = %+v, want %+v", back, d)
	}
}
