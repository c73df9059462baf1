package lab

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

// The load shapes of 'sluice-lab bench --vendor-sim'.
const (
	loadUniform = "uniform"
	loadUneven  = "uneven"
)

// The bursts of an idle process under uneven load: idle for a gap drawn
// uniformly from [burstGapMin, burstGapMax], then every worker calls back
// to back for a burst drawn from [burstMin, burstMax], and so on. The
// first gap starts at the beginning of the run.
const (
	burstGapMin = 4 * time.Second
	burstGapMax = 12 * time.Second
	burstMin    = 1 * time.Second
	burstMax    = 3 * time.Second
)

// window is a half-open span [from, to) of a run, measured from its start.
type window struct {
	From time.Duration `json:"from"`
	To   time.Duration `json:"to"`
}

// workerPlan says when one worker calls: always, or only inside windows
// (sorted, disjoint).
type workerPlan struct {
	Always  bool     `json:"always"`
	Windows []window `json:"windows,omitempty"`
}

// at reports whether the worker calls at t; when it does not, wait is how
// long until it does, and -1 when it never does again.
func (p workerPlan) at(t time.Duration) (active bool, wait time.Duration) {
	if p.Always {
		return true, 0
	}
	for _, w := range p.Windows {
		if t < w.From {
			return false, w.From - t
		}
		if t < w.To {
			return true, 0
		}
	}
	return false, -1
}

// heavyProcesses returns how many processes call all the time under uneven
// load: one when there are one or two processes, two from three on.
func heavyProcesses(processes int) int {
	if processes >= 3 {
		return 2
	}
	return 1
}

// planLoad returns the plan of each worker of process (0-based) out of
// processes for a run of d. Under uniform load every worker calls all the
// time. Under uneven load the first heavyProcesses(processes) processes
// call all the time with every worker; each other process is idle, with
// bursts (see burstGapMin): its workers share the process's bursts, which
// are drawn from seed and the process number, so that a run is
// reproducible.
func planLoad(shape string, process, processes, workers int, d time.Duration, seed uint64) ([]workerPlan, error) {
	if shape != loadUniform && shape != loadUneven {
		return nil, clikit.Usagef("--load %q: must be uneven or uniform", shape)
	}
	plans := make([]workerPlan, workers)
	if shape == loadUniform || process < heavyProcesses(processes) {
		for i := range plans {
			plans[i].Always = true
		}
		return plans, nil
	}
	rng := rand.New(rand.NewPCG(seed, uint64(process)+0x5bd1e995))
	var ws []window
	for t := time.Duration(0); t < d; {
		t += between(rng, burstGapMin, burstGapMax)
		if t >= d {
			break
		}
		end := min(t+between(rng, burstMin, burstMax), d)
		ws = append(ws, window{From: t, To: end})
		t = end
	}
	for i := range plans {
		plans[i].Windows = ws
	}
	return plans, nil
}

// between draws a duration uniformly from [lo, hi].
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

// describeLoad is the load shape as --help and the report state it.
func describeLoad(shape string, processes int) string {
	if shape == loadUniform {
		return "uniform: every worker of every process calls back to back"
	}
	h := heavyProcesses(processes)
	if processes <= h {
		return "uneven: one process, every worker back to back"
	}
	return fmt.Sprintf("uneven: %d heavy process(es) with every worker back to back; %d idle process(es) "+
		"bursting every %s-%s for %s-%s", h, processes-h, burstGapMin, burstGapMax, burstMin, burstMax)
}

// dists are the request generator's distributions, as flags give them.
type dists struct {
	Input     string `json:"input"`      // prompt tokens
	MaxTokens string `json:"max_tokens"` // the request's max_tokens
	Output    string `json:"output"`     // output tokens, at most max_tokens
}

// genCall is one generated request.
type genCall struct {
	Body      []byte // the JSON body
	Input     int64  // input tokens as the simulator counts them (actual)
	MaxTokens int64
	Output    int64 // output tokens the simulator is told to produce (actual)
	EstInput  int64 // the caller's estimate of Input
	EstOutput int64 // the caller's estimate of Output
}

// reqGen draws requests: a prompt size, max_tokens and an output length
// from distributions, and estimates of the input and output that are the
// actual values times a factor drawn uniformly from [1−e, 1+e]. It is not
// safe for concurrent use: give each worker its own.
type reqGen struct {
	vendor                 vendorsim.Vendor
	input, maxTok, output  vendorsim.Dist
	estErr                 float64
	rng                    *rand.Rand
	model, path            string
	maxInput, maxMaxTokens int64
}

// newReqGen returns a generator seeded with seed and stream (a worker's
// number), so that each worker draws its own reproducible sequence.
func newReqGen(v vendorsim.Vendor, d dists, estErr float64, seed, stream uint64) (*reqGen, error) {
	g := &reqGen{vendor: v, estErr: estErr, rng: rand.New(rand.NewPCG(seed, stream)), maxInput: 1_000_000, maxMaxTokens: 100_000}
	for _, f := range []struct {
		flag, v string
		into    *vendorsim.Dist
	}{{"input-tokens", d.Input, &g.input}, {"max-tokens", d.MaxTokens, &g.maxTok}, {"output-tokens", d.Output, &g.output}} {
		dd, err := vendorsim.ParseDist(f.v)
		if err != nil {
			return nil, clikit.Usagef("--%s %q: %v", f.flag, f.v, err)
		}
		*f.into = dd
	}
	if !(estErr >= 0 && estErr < 1) {
		return nil, clikit.Usagef("--estimate-error %v: must be at least 0 and below 1", estErr)
	}
	if g.path = vendorPath(v); g.path == "" {
		return nil, clikit.Usagef("--vendor-sim %q: must be openai, anthropic or azure", v)
	}
	g.model = vendorModel(v)
	return g, nil
}

// The models the benchmark's requests name. Its Azure deployment is named
// after the OpenAI model it serves.
const (
	benchOpenAIModel    = "gpt-4o-mini"
	benchAnthropicModel = "claude-sonnet-4-5"
)

// azureAPIVersion is the api-version of the benchmark's Azure requests.
const azureAPIVersion = "2024-10-21"

// vendorModel returns the model (Azure: the deployment) the benchmark's
// requests to v name.
func vendorModel(v vendorsim.Vendor) string {
	if v == vendorsim.Anthropic {
		return benchAnthropicModel
	}
	return benchOpenAIModel
}

// vendorPath returns the path the benchmark's requests to v are sent to,
// without a query; "" for an unknown vendor.
func vendorPath(v vendorsim.Vendor) string {
	switch v {
	case vendorsim.OpenAI:
		return vendorsim.PathChatCompletions
	case vendorsim.Anthropic:
		return vendorsim.PathMessages
	case vendorsim.Azure:
		return "/openai/deployments/" + benchOpenAIModel + "/chat/completions"
	}
	return ""
}

// draw samples d, rounded to a whole number in [lo, hi].
func (g *reqGen) draw(d vendorsim.Dist, lo, hi int64) int64 {
	var v float64
	switch d.Kind {
	case vendorsim.KindUniform:
		v = d.A + (d.B-d.A)*g.rng.Float64()
	case vendorsim.KindLogNormal:
		v = d.A * math.Exp(d.B*g.rng.NormFloat64())
	default:
		v = d.A
	}
	return min(max(int64(math.Round(v)), lo), hi)
}

// estimate returns actual times a factor drawn from [1−e, 1+e], at least 1.
func (g *reqGen) estimate(actual int64) int64 {
	f := 1 - g.estErr + 2*g.estErr*g.rng.Float64()
	return max(1, int64(math.Round(float64(actual)*f)))
}

// wireMessage is a chat message of a request body.
type wireMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// next draws the next request.
func (g *reqGen) next() (genCall, error) {
	in := g.draw(g.input, 1, g.maxInput)
	maxTok := g.draw(g.maxTok, 1, g.maxMaxTokens)
	out := g.draw(g.output, 1, maxTok)
	body, err := json.Marshal(struct {
		Model     string        `json:"model"`
		MaxTokens int64         `json:"max_tokens"`
		Messages  []wireMessage `json:"messages"`
	}{g.model, maxTok, []wireMessage{{Role: "user", Content: prompt(in)}}})
	if err != nil {
		return genCall{}, err
	}
	actual, err := vendorsim.InputTokens(g.path, body)
	if err != nil {
		return genCall{}, fmt.Errorf("bench: the simulator cannot count a generated request: %w", err)
	}
	return genCall{Body: body, Input: actual, MaxTokens: maxTok, Output: out,
		EstInput: g.estimate(actual), EstOutput: g.estimate(out)}, nil
}

// prompt returns text of 4n bytes: n tokens as the simulator counts them.
func prompt(n int64) string {
	const word = "lorem ipsum dolor sit amet, " // 28 bytes
	var b strings.Builder
	b.Grow(int(4 * n))
	for int64(b.Len())+int64(len(word)) <= 4*n {
		b.WriteString(word)
	}
	b.WriteString(strings.Repeat("x", int(4*n)-b.Len()))
	return b.String()
}
