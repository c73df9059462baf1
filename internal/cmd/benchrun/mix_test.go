package benchrun

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/store"
)

func TestParseMix(t *testing.T) {
	tests := []struct {
		spec    string
		want    []Class
		wantErr string
	}{
		{spec: "200x20,5000x2", want: []Class{
			{Name: "200x20", Items: []store.Item{{Dimension: "d", Cost: 200}}, Workers: 20},
			{Name: "5000x2", Items: []store.Item{{Dimension: "d", Cost: 5000}}, Workers: 2},
		}},
		{spec: " 1x1 ", want: []Class{{Name: "1x1", Items: []store.Item{{Dimension: "d", Cost: 1}}, Workers: 1}}},
		{spec: "200", wantErr: "want COSTxWORKERS"},
		{spec: "0x2", wantErr: "cost 0"},
		{spec: "5x0", wantErr: "0 workers"},
		{spec: "5x10001", wantErr: "10001 workers"},
		{spec: "1x1,", wantErr: "class \"\""},
		{spec: strings.Repeat("1x1,", 16) + "1x1", wantErr: "17 classes"},
	}
	for _, tt := range tests {
		got, err := ParseMix(tt.spec, "d")
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseMix(%q) = %v, want an error containing %q", tt.spec, err, tt.wantErr)
			}
			continue
		}
		if err != nil || len(got) != len(tt.want) {
			t.Fatalf("ParseMix(%q) = %+v, %v; want %+v", tt.spec, got, err, tt.want)
		}
		for i := range got {
			g, w := got[i], tt.want[i]
			if g.Name != w.Name || g.Workers != w.Workers || g.Items[0] != w.Items[0] {
				t.Errorf("ParseMix(%q)[%d] = %+v, want %+v", tt.spec, i, g, w)
			}
		}
	}
}

func FuzzParseMix(f *testing.F) {
	for _, s := range []string{"200x20,5000x2", "1x1", "x", "", "9999999999999x1", "1x1,,", "-1x-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		classes, err := ParseMix(spec, "d")
		if err != nil {
			if errors.Unwrap(err) != nil && !strings.Contains(err.Error(), "--mix") {
				t.Fatalf("error %v does not name the flag", err)
			}
			return
		}
		for _, c := range classes {
			if c.Workers < 1 || c.Items[0].Cost < 1 || len(classes) > MaxClasses {
				t.Fatalf("ParseMix(%q) accepted %+v", spec, c)
			}
		}
	})
}

func TestFCFS(t *testing.T) {
	one := func(cost int64, workers int) Class {
		return Class{Items: []store.Item{{Dimension: "d", Cost: cost}}, Workers: workers}
	}
	tests := []struct {
		name                      string
		classes                   []Class
		capacity, refill, balance float64
		d                         time.Duration
		want                      []float64
	}{
		// Served at 0; the next at exactly 1s is outside the run.
		{"one worker", []Class{one(100, 1)}, 100, 100, 100, time.Second, []float64{1}},
		// Two workers of 50: 0, 0, then 0.5 s (the first), 1 s (outside).
		{"two workers", []Class{one(50, 2)}, 100, 100, 100, time.Second, []float64{1.5}},
		// A large request arrives with the small ones and is served in
		// its turn, not starved: at 0 s 200, 200, 5000, 200, 200 (the
		// balance 6000 → 0); the large one again at 4.8 s, the small
		// ones at 5.0 and 5.2 s; the large one's third turn, 10.2 s, is
		// past the end.
		{"large in turn", []Class{one(200, 2), one(5000, 1)}, 6000, 1000, 6000, 10 * time.Second, []float64{3, 2}},
		// A cost above capacity is never served: ten at 0 s, then one
		// every 100 ms until 900 ms.
		{"above capacity", []Class{one(10, 1), one(200, 1)}, 100, 100, 100, time.Second, []float64{19, 0}},
	}
	for _, tt := range tests {
		got := FCFS(tt.classes, tt.capacity, tt.refill, tt.balance, tt.d)
		for i := range tt.want {
			if got[i] != tt.want[i] {
				t.Errorf("%s: FCFS = %v, want %v", tt.name, got, tt.want)
				break
			}
		}
	}
}
