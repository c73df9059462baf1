package lab

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

func TestPlanLoadUniform(t *testing.T) {
	plans, err := planLoad(loadUniform, 3, 4, 5, time.Minute, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(plans), 5; got != want {
		t.Fatalf("%d plans, want %d", got, want)
	}
	for i, p := range plans {
		if active, wait := p.at(59 * time.Second); !p.Always || !active || wait != 0 {
			t.Errorf("worker %d: %+v at 59s: %v %v; want always active", i, p, active, wait)
		}
	}
}

func TestPlanLoadUneven(t *testing.T) {
	const d = 60 * time.Second
	tests := []struct {
		process, processes int
		heavy              bool
	}{
		{0, 1, true}, {0, 2, true}, {1, 2, false}, {0, 4, true}, {1, 4, true}, {2, 4, false}, {3, 4, false},
	}
	for _, tt := range tests {
		plans, err := planLoad(loadUneven, tt.process, tt.processes, 3, d, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range plans {
			if p.Always != tt.heavy {
				t.Errorf("process %d of %d: always = %v, want %v", tt.process, tt.processes, p.Always, tt.heavy)
			}
			if !reflect.DeepEqual(p, plans[0]) {
				t.Errorf("process %d of %d: workers do not share the bursts: %+v vs %+v", tt.process, tt.processes, p, plans[0])
			}
		}
		if tt.heavy {
			continue
		}
		ws := plans[0].Windows
		if len(ws) == 0 {
			t.Fatalf("process %d of %d: no bursts in %s", tt.process, tt.processes, d)
		}
		var prev time.Duration
		for i, w := range ws {
			gap, burst := w.From-prev, w.To-w.From
			if gap < burstGapMin || gap > burstGapMax {
				t.Errorf("burst %d: gap %s, want %s-%s", i, gap, burstGapMin, burstGapMax)
			}
			if w.To > d || burst <= 0 || (burst > burstMax) || (burst < burstMin && w.To != d) {
				t.Errorf("burst %d: %s-%s, want %s-%s long, within the run", i, w.From, w.To, burstMin, burstMax)
			}
			prev = w.To
		}
	}
}

func TestPlanLoadIsSeeded(t *testing.T) {
	a, _ := planLoad(loadUneven, 2, 4, 2, time.Minute, 42)
	b, _ := planLoad(loadUneven, 2, 4, 2, time.Minute, 42)
	c, _ := planLoad(loadUneven, 3, 4, 2, time.Minute, 42)
	d, _ := planLoad(loadUneven, 2, 4, 2, time.Minute, 43)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("same seed and process, different bursts:\n%+v\n%+v", a, b)
	}
	if reflect.DeepEqual(a, c) || reflect.DeepEqual(a, d) {
		t.Errorf("another process or seed drew the same bursts: %+v", a)
	}
	if _, err := planLoad("bursty", 0, 1, 1, time.Second, 1); err == nil {
		t.Error("planLoad accepted load \"bursty\"")
	}
}

func TestWorkerPlanAt(t *testing.T) {
	p := workerPlan{Windows: []window{{From: 2 * time.Second, To: 3 * time.Second}, {From: 10 * time.Second, To: 11 * time.Second}}}
	tests := []struct {
		at     time.Duration
		active bool
		wait   time.Duration
	}{
		{0, false, 2 * time.Second},
		{2 * time.Second, true, 0},
		{2999 * time.Millisecond, true, 0},
		{3 * time.Second, false, 7 * time.Second},
		{10500 * time.Millisecond, true, 0},
		{11 * time.Second, false, -1},
	}
	for _, tt := range tests {
		active, wait := p.at(tt.at)
		if active != tt.active || wait != tt.wait {
			t.Errorf("at(%s) = %v, %s; want %v, %s", tt.at, active, wait, tt.active, tt.wait)
		}
	}
}

var testDists = dists{Input: "lognormal:1000,0.5", MaxTokens: "uniform:256,1024", Output: "lognormal:100,0.6"}

func TestReqGen(t *testing.T) {
	for _, v := range []vendorsim.Vendor{vendorsim.OpenAI, vendorsim.Anthropic} {
		t.Run(string(v), func(t *testing.T) {
			const e = 0.5
			g, err := newReqGen(v, testDists, e, 9, 3)
			if err != nil {
				t.Fatal(err)
			}
			path := vendorsim.PathChatCompletions
			if v == vendorsim.Anthropic {
				path = vendorsim.PathMessages
			}
			var sumRatio float64
			const n = 2000
			for range n {
				c, err := g.next()
				if err != nil {
					t.Fatal(err)
				}
				got, err := vendorsim.InputTokens(path, c.Body)
				if err != nil || got != c.Input {
					t.Fatalf("simulator counts %d (%v), generator says %d", got, err, c.Input)
				}
				var body struct {
					MaxTokens int64 `json:"max_tokens"`
				}
				if err := json.Unmarshal(c.Body, &body); err != nil || body.MaxTokens != c.MaxTokens {
					t.Fatalf("body max_tokens %d (%v), want %d", body.MaxTokens, err, c.MaxTokens)
				}
				if c.MaxTokens < 256 || c.MaxTokens > 1024 || c.Output < 1 || c.Output > c.MaxTokens {
					t.Fatalf("max_tokens %d, output %d: want 256-1024 and 1-max_tokens", c.MaxTokens, c.Output)
				}
				for _, p := range [][2]int64{{c.EstInput, c.Input}, {c.EstOutput, c.Output}} {
					lo, hi := math.Floor(float64(p[1])*(1-e)), math.Ceil(float64(p[1])*(1+e))
					if float64(p[0]) < max(1, lo) || float64(p[0]) > hi {
						t.Fatalf("estimate %d of %d: outside ±%g", p[0], p[1], e)
					}
				}
				sumRatio += float64(c.EstInput) / float64(c.Input)
			}
			if mean := sumRatio / n; math.Abs(mean-1) > 0.03 {
				t.Errorf("mean estimate/actual = %.3f, want about 1 (unbiased)", mean)
			}
		})
	}
}

func TestReqGenIsSeeded(t *testing.T) {
	draw := func(seed, stream uint64) []genCall {
		g, err := newReqGen(vendorsim.OpenAI, testDists, 0.5, seed, stream)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]genCall, 20)
		for i := range out {
			if out[i], err = g.next(); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	if !reflect.DeepEqual(draw(5, 1), draw(5, 1)) {
		t.Error("the same seed and stream drew different requests")
	}
	if reflect.DeepEqual(draw(5, 1), draw(5, 2)) {
		t.Error("two workers drew the same requests")
	}
}

func TestReqGenExactEstimates(t *testing.T) {
	g, err := newReqGen(vendorsim.Anthropic, testDists, 0, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		c, err := g.next()
		if err != nil {
			t.Fatal(err)
		}
		if c.EstInput != c.Input || c.EstOutput != c.Output {
			t.Fatalf("with no estimate error: %+v", c)
		}
	}
}

func TestReqGenRefusesBadInput(t *testing.T) {
	tests := []struct {
		name string
		d    dists
		e    float64
		v    vendorsim.Vendor
	}{
		{"bad dist", dists{Input: "normal:3", MaxTokens: "1", Output: "1"}, 0.5, vendorsim.OpenAI},
		{"error 1", testDists, 1, vendorsim.OpenAI},
		{"negative error", testDists, -0.1, vendorsim.OpenAI},
		{"a vendor the simulator does not play", testDists, 0.5, vendorsim.Vendor("gemini")},
	}
	for _, tt := range tests {
		if _, err := newReqGen(tt.v, tt.d, tt.e, 1, 1); err == nil {
			t.Errorf("%s: accepted", tt.name)
		}
	}
}

func TestPrompt(t *testing.T) {
	for _, n := range []int64{1, 6, 7, 1000} {
		if got := int64(len(prompt(n))); got != 4*n {
			t.Errorf("prompt(%d) is %d bytes, want %d", n, got, 4*n)
		}
	}
}

func TestParseOutage(t *testing.T) {
	got, err := parseOutage("0.5@20s+30s")
	if want := (vendorsim.Scale{At: 20 * time.Second, For: 30 * time.Second, Factor: 0.5}); err != nil || got != want {
		t.Errorf("parseOutage = %+v, %v; want %+v", got, err, want)
	}
	for _, bad := range []string{"", "0.5", "0.5@20s", "2@1s+1s", "0@1s+1s", "x@1s+1s", "0.5@-1s+1s", "0.5@1s+0s", "0.5@1s+x"} {
		if _, err := parseOutage(bad); err == nil {
			t.Errorf("parseOutage(%q) accepted", bad)
		}
	}
}

func TestParseModes(t *testing.T) {
	got, err := parseModes("naive, sluice")
	if want := []string{modeNaive, modeSluice}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("parseModes = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"", "sluice,sluice", "fast", "sluice,"} {
		if _, err := parseModes(bad); err == nil {
			t.Errorf("parseModes(%q) accepted", bad)
		}
	}
}

func FuzzParseOutage(f *testing.F) {
	for _, s := range []string{"0.5@20s+30s", "0.1@0s+1ms", "1@1s+1s", "0.5@20s", "x@y+z", "0.5@-1s+1s", "NaN@1s+1s", "0.5@1s+1s+1s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sc, err := parseOutage(s)
		if err != nil {
			return
		}
		if !(sc.Factor > 0 && sc.Factor < 1) || sc.At < 0 || sc.For <= 0 {
			t.Fatalf("parseOutage(%q) = %+v: out of range", s, sc)
		}
	})
}

func FuzzParseModes(f *testing.F) {
	for _, s := range []string{"sluice,naive,local", "naive", " local , sluice", "", "sluice,sluice", "a,b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		modes, err := parseModes(s)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, m := range modes {
			if (m != modeSluice && m != modeNaive && m != modeLocal) || seen[m] {
				t.Fatalf("parseModes(%q) = %v", s, modes)
			}
			seen[m] = true
		}
		if len(modes) == 0 {
			t.Fatalf("parseModes(%q) returned no mode and no error", s)
		}
	})
}

// TestLocalDim: the local baseline's limiter is a bucket at 1/P of the
// profile's, whose refunds never lift it above its capacity and whose
// extra charges put it into debt.
func TestLocalDim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		cfg := bucket.Config{Type: bucket.Tokens, Capacity: 40, RefillAmount: 60, RefillPeriod: time.Minute}
		d := newLocalDim(vendors.Dimension{Config: cfg}, 4) // 10 tokens, 0.25 per second
		waits := func(n int64) time.Duration {
			t.Helper()
			start := time.Now()
			if err := d.take(ctx, n); err != nil {
				t.Fatal(err)
			}
			return time.Since(start)
		}
		if got := waits(10); got != 0 {
			t.Fatalf("taking the full burst waited %s", got)
		}
		d.adjust(-100) // a refund of 100 on an empty bucket of 10
		if got := waits(10); got != 0 {
			t.Errorf("taking 10 after the refund waited %s, want 0", got)
		}
		if got, want := waits(1), 4*time.Second; got != want {
			t.Errorf("taking 1 more waited %s, want %s: the refund lifted the bucket above its 10", got, want)
		}
		time.Sleep(time.Minute) // full again
		d.adjust(-5)            // a refund on a full bucket is lost
		d.adjust(8)             // an extra charge puts it 8 below full
		if got, want := waits(10), 32*time.Second; got != want {
			t.Errorf("taking 10 waited %s, want %s", got, want)
		}
	})
}

// TestLocalCallWaitsOutTheRun: a local-mode call whose limiter cannot
// admit it before the run ends waits for the end, rather than giving up at
// once and letting its worker draw request after request.
func TestLocalCallWaitsOutTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		run := vbRun{Mode: modeLocal, Vendor: vendorsim.OpenAI, Limits: vendorsim.Limits{RPM: 60, TPM: 1000},
			Processes: 1, Workers: 1, Duration: time.Second, Load: loadUniform, Dists: testDists, EstimateError: 0.5}
		p, err := newVBProcess(run, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := p.local[1].take(ctx, 900); err != nil { // the tokens limiter is empty now
			t.Fatal(err)
		}
		start := time.Now()
		p.localCall(ctx, genCall{EstInput: 500, MaxTokens: 256, EstOutput: 100})
		if got := time.Since(start); got != time.Second || p.part.Abandoned != 1 || p.part.Calls != 0 {
			t.Errorf("localCall returned after %s with %d abandoned, %d calls; want 1s, 1, 0", got, p.part.Abandoned, p.part.Calls)
		}
	})
}
