package vendorsim

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
)

var fuzzPaths = []string{PathChatCompletions, PathResponses, PathEmbeddings, PathMessages, "/openai/deployments/d/chat/completions", "/v2/x"}

func FuzzInputTokens(f *testing.F) {
	f.Add(uint8(0), chatBody(3, 10))
	f.Add(uint8(1), `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"hey"}]}],"instructions":"be brief","max_output_tokens":5}`)
	f.Add(uint8(2), `{"model":"m","input":[[1,2,3]]}`)
	f.Add(uint8(2), `{"model":"m","input":[1,2,3]}`)
	f.Add(uint8(3), `{"model":"m","max_tokens":5,"system":[{"type":"text","text":"sys"}],"tools":[{"name":"t","input_schema":{}}],"messages":[{"role":"user","content":"x"}]}`)
	f.Add(uint8(5), `{}`)
	f.Fuzz(func(t *testing.T, p uint8, body string) {
		path := fuzzPaths[int(p)%len(fuzzPaths)]
		n, err := InputTokens(path, []byte(body))
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v does not match ErrBadRequest", err)
			}
			return
		}
		if n < 0 || n > int64(len(body)) {
			t.Fatalf("InputTokens = %d for a %d-byte body", n, len(body))
		}
	})
}

func FuzzParseDist(f *testing.F) {
	for _, s := range []string{"100", "fixed:3", "uniform:1,5", "lognormal:200,0.5", "uniform:5,1", "gamma:1", "fixed:NaN", "lognormal:1,1e9"} {
		f.Add(s, false)
	}
	for _, s := range []string{"200ms", "fixed:1s", "uniform:50ms,300ms", "lognormal:200ms,0.5", "uniform:1h,1m"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, latency bool) {
		parse := ParseDist
		if latency {
			parse = ParseLatency
		}
		d, err := parse(s)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v does not match ErrConfig", err)
			}
			return
		}
		if err := d.validate("d"); err != nil {
			t.Fatalf("ParseDist(%q) = %+v, which does not validate: %v", s, d, err)
		}
		// What String prints parses back to the same distribution.
		back, err := ParseDist(d.String())
		if err != nil || back != d {
			t.Fatalf("ParseDist(%q) = %+v; String %q parses back to %+v, %v", s, d, d.String(), back, err)
		}
	})
}

// FuzzServe sends arbitrary bodies and control headers: the Sim answers
// every one with a status it documents and a JSON body.
func FuzzServe(f *testing.F) {
	f.Add(uint8(0), uint8(0), chatBody(3, 10), "5", "")
	f.Add(uint8(3), uint8(1), `{"model":"m","max_tokens":3,"stream":true,"messages":[{"role":"user","content":"x"}]}`, "2", "1")
	f.Add(uint8(1), uint8(2), `{"model":"m","input":"x","stream":true}`, "", "")
	f.Add(uint8(4), uint8(2), `{"messages":[{"role":"user","content":"x"}],"max_tokens":9,"best_of":2}`, "-1", "")
	vendors := []Vendor{OpenAI, Anthropic, Azure}
	f.Fuzz(func(t *testing.T, p, v uint8, body, out, cache string) {
		vendor := vendors[int(v)%len(vendors)]
		s, _ := newSim(t, Config{Vendor: vendor, Limits: map[Vendor]Limits{OpenAI: {RPM: 60, TPM: 1000},
			Anthropic: {RPM: 60, ITPM: 1000, OTPM: 100}, Azure: {TPM: 10000}}[vendor]})
		w := post(t, s, fuzzPaths[int(p)%len(fuzzPaths)], body, HeaderOutputTokens, out, HeaderCacheReadTokens, cache)
		switch w.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusNotFound, http.StatusTooManyRequests:
		default:
			t.Fatalf("status %d", w.Code)
		}
		if strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") && !json.Valid(w.Body.Bytes()) {
			t.Fatalf("invalid JSON body %q", w.Body.String())
		}
		if st := s.Stats(); st.InFlight != 0 {
			t.Fatalf("InFlight = %d after the response", st.InFlight)
		}
	})
}
