package vendorsim

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestConfigErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{Vendor: "gemini"}, "Vendor"},
		{Config{Vendor: OpenAI, Limits: Limits{RPM: -1}}, "Limits.RPM"},
		{Config{Vendor: OpenAI, Limits: Limits{ITPM: 10}}, "Limits.ITPM"},
		{Config{Vendor: Anthropic, Limits: Limits{TPM: 10}}, "Limits.TPM"},
		{Config{Vendor: Azure, Limits: Limits{RPD: 10}}, "Limits.RPD"},
		{Config{Vendor: OpenAI, Limits: Limits{TPM: 2e12}}, "Limits.TPM"},
		{Config{Vendor: OpenAI, ErrorRate: 1.5}, "ErrorRate"},
		{Config{Vendor: OpenAI, ErrorRate: math.NaN()}, "ErrorRate"},
		{Config{Vendor: OpenAI, OutputTokens: Uniform(5, 1)}, "OutputTokens.B"},
		{Config{Vendor: OpenAI, TimeToFirstToken: Dist{Kind: "gamma"}}, "TimeToFirstToken.Kind"},
		{Config{Vendor: OpenAI, PerOutputToken: LogNormal(1, -1)}, "PerOutputToken.B"},
		{Config{Vendor: OpenAI, Schedule: []Scale{{For: time.Second, Factor: 0}}}, "Schedule[0].Factor"},
		{Config{Vendor: OpenAI, Schedule: []Scale{{At: -1, For: time.Second, Factor: 1}}}, "Schedule[0].At"},
		{Config{Vendor: OpenAI, Schedule: []Scale{{Factor: 1}}}, "Schedule[0].For"},
		{Config{Vendor: OpenAI, DefaultMaxTokens: -1}, "DefaultMaxTokens"},
		{Config{Vendor: OpenAI, StreamChunkTokens: -1}, "StreamChunkTokens"},
		{Config{Vendor: OpenAI, SeriesInterval: -1}, "SeriesInterval"},
	} {
		_, err := New(tc.cfg)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) = %v, want a FieldError on %s matching ErrConfig", tc.cfg, err, tc.field)
		}
	}
}

func TestDistSample(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		d      Dist
		lo, hi float64
	}{
		{Dist{}, 0, 0},
		{Fixed(3), 3, 3},
		{Uniform(2, 5), 2, 5},
		{LogNormal(100, 0), 100, 100},
		{LogNormal(100, 1), 0, 1e12},
	} {
		for range 1000 {
			if got := tc.d.sample(r); got < tc.lo || got > tc.hi {
				t.Fatalf("%v drew %v, want within [%v, %v]", tc.d, got, tc.lo, tc.hi)
			}
		}
	}
	got, err := ParseLatency("uniform:50ms,300ms")
	if want := Uniform(0.05, 0.3); err != nil || got != want {
		t.Errorf("ParseLatency = %+v, %v; want %+v", got, err, want)
	}
}

func TestBucketWaitIsExact(t *testing.T) {
	b := newTokenBucket(7, time.Minute, time.Minute, epoch)
	b.take(7)
	// 1 token at 7 per minute: 60/7 s, rounded up to the nanosecond.
	want := time.Duration((int64(time.Minute) + 6) / 7)
	if got := b.waitFor(amount{whole: 1}); got != want {
		t.Fatalf("waitFor(1) = %v, want %v", got, want)
	}
	b.advance(epoch.Add(want - 1))
	if b.has(1) {
		t.Fatal("has(1) one nanosecond early")
	}
	b.advance(epoch.Add(want))
	if !b.has(1) {
		t.Fatal("not has(1) on time")
	}
	// Huge limits do not overflow.
	big := newTokenBucket(1e12, 24*time.Hour, 24*time.Hour, epoch)
	big.take(2e12)
	if got := big.untilFull(); got != 48*time.Hour {
		t.Fatalf("untilFull = %v, want 48h", got)
	}
}

func TestSeries(t *testing.T) {
	s, clk := newSim(t, Config{Vendor: OpenAI, Limits: Limits{RPM: 6000}, SeriesInterval: time.Second})
	for range 4 {
		post(t, s, PathChatCompletions, chatBody(1, 10))
		clk.Add(400 * time.Millisecond)
	}
	// Requests at 0, 0.4, 0.8 and 1.2 s: points at 0 s and 1.2 s, the
	// 0.4 s and 0.8 s requests falling in the first interval.
	got := s.Stats().Series
	if len(got) != 2 || got[0].At != 0 || got[1].At != 1200*time.Millisecond || got[1].Admitted != 4 || got[1].Counted[0] != 4 {
		t.Fatalf("series = %+v", got)
	}
}
