package fleetcheck

import (
	"math"
	"testing"
)

func bucket40() Limit { return Limit{Capacity: 40, Amount: 40, PeriodMs: 60_000} }

func grants(at ...int64) []Event {
	ev := make([]Event, len(at))
	for i, t := range at {
		ev[i] = Event{Kind: Grant, Lo: t, Hi: t, Cost: 1}
	}
	return ev
}

func TestCheckTimeBased(t *testing.T) {
	burst := grants(make([]int64, 40)...)
	tests := []struct {
		name   string
		limit  Limit
		events []Event
		want   float64
	}{
		{"empty", bucket40(), nil, -40},
		{"full burst", bucket40(), burst, 0},
		{"one over the burst", bucket40(), append(grants(0), burst...), 1},
		{"burst then exact refill", bucket40(), append(grants(1500), burst...), 0},
		{"burst then early refill", bucket40(), append(grants(1499), burst...), 40.0 / 60_000},
		{"charge alone is not judged", bucket40(), append(burst, Event{Kind: Charge, Lo: 10, Hi: 10, Cost: 5}), 0},
		{"charge counts against a later grant", bucket40(), append(burst, Event{Kind: Charge, Lo: 10, Hi: 10, Cost: 5}, Event{Kind: Grant, Lo: 20, Hi: 20, Cost: 1}), 6 - 20*40.0/60_000},
		{"charge outside the window refills", bucket40(), append(burst, Event{Kind: Charge, Lo: 60_000, Hi: 60_000, Cost: 40}), 0},
		{"uncertain grant is not blamed", bucket40(), append(burst, Event{Kind: Grant, Lo: 0, Hi: 1500, Cost: 1}), 0},
		{"two bursts a second apart", bucket40(), append(burst, grants(1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000,
			1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000)...), 20 - 40.0/60},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Check(Dimension{Name: "d", Limit: tt.limit, Events: tt.events})
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(r.Excess-tt.want) > 1e-9 {
				t.Errorf("excess = %v, want %v (%v)", r.Excess, tt.want, r)
			}
		})
	}
}

func TestCheckConcurrent(t *testing.T) {
	l := Limit{Capacity: 2, Concurrent: true}
	hold := func(id string, from, to int64) []Event {
		return []Event{{Kind: Grant, Lo: from - 1, Hi: from, Cost: 1, Lease: id}, {Kind: Release, Lo: to, Hi: to + 1, Lease: id}}
	}
	var seq, over []Event
	seq = append(append(append(seq, hold("a", 0, 10)...), hold("b", 5, 20)...), hold("c", 10, 30)...)
	over = append(append(append(over, hold("a", 0, 11)...), hold("b", 5, 20)...), hold("c", 10, 30)...)
	tests := []struct {
		name   string
		events []Event
		want   float64
	}{
		{"back to back", seq, 0},
		{"overlap of one", over, 1},
		{"never released", append(hold("a", 0, 1), Event{Kind: Grant, Lo: 2, Hi: 3, Cost: 3, Lease: "z"}), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Check(Dimension{Name: "c", Limit: l, Events: tt.events})
			if err != nil {
				t.Fatal(err)
			}
			if r.Excess != tt.want {
				t.Errorf("excess = %v, want %v (%v)", r.Excess, tt.want, r)
			}
		})
	}
}

func TestCheckRejectsMalformed(t *testing.T) {
	bad := []Dimension{
		{Name: "cap", Limit: Limit{Capacity: 0, Amount: 1, PeriodMs: 1}},
		{Name: "period", Limit: Limit{Capacity: 1, Amount: 1}},
		{Name: "order", Limit: bucket40(), Events: []Event{{Kind: Grant, Lo: 2, Hi: 1, Cost: 1}}},
		{Name: "cost", Limit: bucket40(), Events: []Event{{Kind: Grant, Cost: -1}}},
		{Name: "release", Limit: Limit{Capacity: 1, Concurrent: true}, Events: []Event{{Kind: Release, Lease: "x"}}},
	}
	for _, d := range bad {
		if _, err := Check(d); err == nil {
			t.Errorf("%s: Check accepted a malformed history", d.Name)
		}
	}
}

func TestUse(t *testing.T) {
	d := Dimension{Limit: bucket40(), Events: grants(make([]int64, 40)...)}
	if got := TimeUse(d, 0, 60_000); got != 0.5 {
		t.Errorf("TimeUse = %v, want 0.5", got)
	}
	c := Dimension{Limit: Limit{Capacity: 2, Concurrent: true}, Events: []Event{
		{Kind: Grant, Hi: 0, Cost: 1, Lease: "a"}, {Kind: Release, Lo: 100, Hi: 100, Lease: "a"},
	}}
	if got := SlotUse(c, []Span{{0, 100}}); got != 0.5 {
		t.Errorf("SlotUse = %v, want 0.5", got)
	}
}

// brute is the definition: every window between event instants.
func brute(d Dimension) float64 {
	l := d.Limit
	best := math.Inf(-1)
	for _, s := range d.Events {
		for _, e := range d.Events {
			if s.Lo > e.Hi || e.Kind != Grant {
				continue // windows end at a grant
			}
			var in int64
			for _, x := range d.Events {
				inside := x.Lo >= s.Lo && x.Hi <= e.Hi
				if x.Kind == Charge {
					inside = x.Lo >= s.Lo && x.Hi <= e.Lo // made before the grant was valid
				}
				if inside {
					in += x.Cost
				}
			}
			if in == 0 {
				continue // a window that admitted nothing says nothing
			}
			best = math.Max(best, float64(in)-float64(l.Capacity)-float64(l.Amount)*float64(e.Hi-s.Lo)/float64(l.PeriodMs))
		}
	}
	return best
}

func FuzzCheckMatchesDefinition(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, uint8(5), uint8(3), uint16(100))
	f.Fuzz(func(t *testing.T, data []byte, capacity, amount uint8, period uint16) {
		l := Limit{Capacity: int64(capacity%50) + 1, Amount: int64(amount%50) + 1, PeriodMs: int64(period%2000) + 1}
		var ev []Event
		for i := 0; i+2 < len(data) && len(ev) < 40; i += 3 {
			lo := int64(data[i]) * 7
			kind := Grant
			if data[i+2]%4 == 0 {
				kind = Charge
			}
			ev = append(ev, Event{Kind: kind, Lo: lo, Hi: lo + int64(data[i+1]%16), Cost: int64(data[i+2]%9) + 1})
		}
		d := Dimension{Name: "f", Limit: l, Events: ev}
		r, err := Check(d)
		if err != nil {
			t.Fatal(err)
		}
		if len(ev) == 0 {
			return
		}
		want := brute(d)
		if math.IsInf(want, -1) { // no grant: nothing is judged
			want = -float64(l.Capacity)
		}
		if math.Abs(r.Excess-want) > 1e-6 {
			t.Fatalf("excess = %v, want %v (%v)", r.Excess, want, r)
		}
	})
}

func TestKindString(t *testing.T) {
	for _, tc := range []struct {
		k    Kind
		want string
	}{
		{Grant, "grant"}, {Charge, "charge"}, {Release, "release"}, {Restart, "restart"}, {0, "kind(0)"}, {9, "kind(9)"},
	} {
		if got := tc.k.String(); got != tc.want {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(tc.k), got, tc.want)
		}
	}
}
