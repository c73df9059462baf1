package transport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/vendors"
)

// DefaultAnthropicFactor is what an Estimator multiplies the o200k_base
// token count of an Anthropic prompt by. Anthropic's tokenizer is not
// published; its models count more tokens than OpenAI's o200k_base for the
// same text, so the estimate leans high. The settlement corrects it to the
// count the response reports.
const DefaultAnthropicFactor = 1.2

// DefaultTokenizeLimit is how many bytes of prompt text an Estimator runs
// through the tokenizer; text past it is estimated at 2 tokens per 5 bytes,
// which errs high for prose, code, JSON and non-Latin scripts alike
// (docs/benchmarks.md has the figures).
const DefaultTokenizeLimit = 1 << 20

// Per-message overheads of the chat format: OpenAI's published way of
// counting a chat prompt adds 3 tokens per message, 1 per name, and 3 for
// the reply's priming. The Estimator applies the same to every API.
const (
	tokensPerMessage = 3
	tokensPerName    = 1
	tokensPerReply   = 3
)

// Estimator estimates a request's input tokens offline, with the tiktoken
// encodings (o200k_base, cl100k_base) compiled into the binary: no network
// access, ever. The zero value is ready to use (DefaultAnthropicFactor,
// DefaultTokenizeLimit); an Estimator is safe for concurrent use and loads
// each encoding once, on first use.
type Estimator struct {
	// AnthropicFactor multiplies the o200k_base count of Anthropic
	// prompts; 0 means DefaultAnthropicFactor.
	AnthropicFactor float64
	// TokenizeLimit bounds the bytes of text tokenized per request; 0
	// means DefaultTokenizeLimit.
	TokenizeLimit int
}

// Estimate is what a request body says before it is sent.
type Estimate struct {
	// API is the endpoint the body was read for.
	API API
	// Model is the body's model; empty when it names none (Azure
	// deployments name it in the path).
	Model string
	// Stream reports "stream": true.
	Stream bool
	// IncludeUsage reports a chat stream's stream_options.include_usage.
	IncludeUsage bool
	// InputTokens is the estimated prompt: text, tool definitions, tool
	// calls and results, images, and the chat format's overheads.
	InputTokens int64
	// Characters is the prompt text's length in characters, for OpenAI's
	// ceil(characters/4) rule.
	Characters int64
	// MaxOutputTokens is max_tokens, max_completion_tokens or
	// max_output_tokens; 0 when none is set.
	MaxOutputTokens int64
	// N is the number of completions (n, or best_of on Azure); at least 1.
	N int64
	// Images counts the images in the prompt.
	Images int
	// Exact reports that all the text went through the tokenizer (none
	// was past TokenizeLimit).
	Exact bool
}

// Call returns the estimate as the quantities a vendor profile's admission
// charge is computed from, with outputEstimate as the output the caller
// expects (used by Anthropic's output-tokens limit only).
func (e Estimate) Call(outputEstimate int64) vendors.Call {
	return vendors.Call{InputTokens: e.InputTokens, Characters: e.Characters,
		MaxOutputTokens: e.MaxOutputTokens, OutputEstimate: outputEstimate, N: e.N}
}

// EstimateFor estimates a request body sent to path on vendor v's API with
// a zero Estimator, for tools that have a body and a path (a calibration
// report, a test). The error names the path when it is not an endpoint
// ParseEndpoint knows.
func EstimateFor(v vendors.Vendor, path string, body []byte) (Estimate, error) {
	ep := ParseEndpoint(v, "POST", path)
	if ep.API == UnknownAPI {
		return Estimate{}, &bucket.FieldError{Field: "path", Value: path, Reason: "is not a chat completions, responses, embeddings or messages endpoint"}
	}
	var e Estimator
	return e.Estimate(v, ep.API, body)
}

// wireRequest is the part of a request body the estimate reads.
type wireRequest struct {
	Model               string          `json:"model"`
	Messages            json.RawMessage `json:"messages"`
	Input               json.RawMessage `json:"input"`
	System              json.RawMessage `json:"system"`
	Instructions        json.RawMessage `json:"instructions"`
	Tools               json.RawMessage `json:"tools"`
	Functions           json.RawMessage `json:"functions"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	MaxOutputTokens     *int64          `json:"max_output_tokens"`
	N                   *int64          `json:"n"`
	BestOf              *int64          `json:"best_of"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// Estimate estimates a request body for api on vendor v. It returns an
// error matching sluice.ErrInvalid (a *bucket.FieldError naming the field)
// when the body is not a JSON object or a count in it is negative.
func (e *Estimator) Estimate(v vendors.Vendor, api API, body []byte) (Estimate, error) {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return Estimate{}, &bucket.FieldError{Field: "body", Value: short(body), Reason: "is not a JSON request object: " + err.Error()}
	}
	out := Estimate{API: api, Model: w.Model, Stream: w.Stream, N: 1}
	if w.StreamOptions != nil {
		out.IncludeUsage = w.StreamOptions.IncludeUsage
	}
	if err := out.setCounts(&w); err != nil {
		return Estimate{}, err
	}
	c := e.counter(v, w.Model)
	switch api {
	case Embeddings:
		c.embeddings(w.Input)
	default:
		c.messages(w.Messages)
		c.messages(w.Input)
		c.system(w.System)
		c.system(w.Instructions)
		c.json(w.Tools)
		c.json(w.Functions)
		if api != Embeddings {
			c.tokens += tokensPerReply
		}
	}
	out.InputTokens, out.Characters, out.Images, out.Exact = c.total(), c.chars, c.images, !c.overLimit
	return out, nil
}

// setCounts reads the output cap and the number of completions.
func (out *Estimate) setCounts(w *wireRequest) error {
	for _, f := range []struct {
		name string
		v    *int64
	}{{"max_tokens", w.MaxTokens}, {"max_completion_tokens", w.MaxCompletionTokens}, {"max_output_tokens", w.MaxOutputTokens}} {
		if f.v == nil {
			continue
		}
		if *f.v < 0 {
			return &bucket.FieldError{Field: f.name, Value: *f.v, Reason: "must not be negative"}
		}
		out.MaxOutputTokens = max(out.MaxOutputTokens, *f.v)
	}
	for _, f := range []struct {
		name string
		v    *int64
	}{{"n", w.N}, {"best_of", w.BestOf}} {
		if f.v == nil {
			continue
		}
		if *f.v < 1 || *f.v > 128 {
			return &bucket.FieldError{Field: f.name, Value: *f.v, Reason: "must be between 1 and 128"}
		}
		out.N = max(out.N, *f.v)
	}
	return nil
}

func short(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "…"
	}
	return string(b)
}

// encodings holds the tokenizer codecs, loaded once per process: the
// encodings are read-only and safe for concurrent use.
var encodings struct {
	o200k, cl100k sync.Once
	o, c          tokenizer.Codec
}

func codecFor(enc tokenizer.Encoding) tokenizer.Codec {
	if enc == tokenizer.Cl100kBase {
		encodings.cl100k.Do(func() { encodings.c, _ = tokenizer.Get(tokenizer.Cl100kBase) })
		return encodings.c
	}
	encodings.o200k.Do(func() { encodings.o, _ = tokenizer.Get(tokenizer.O200kBase) })
	return encodings.o
}

// EncodingFor returns the tiktoken encoding the Estimator uses for a
// model: cl100k_base for GPT-4 (not 4o or 4.1), GPT-3.5 and the
// text-embedding models, o200k_base for everything else (GPT-4o, GPT-4.1,
// GPT-5, the o-series, and Anthropic's models as a stand-in).
func EncodingFor(model string) tokenizer.Encoding {
	m := strings.ToLower(model)
	switch {
	case strings.HasPrefix(m, "gpt-4o"), strings.HasPrefix(m, "gpt-4.1"), strings.HasPrefix(m, "gpt-4.5"):
		return tokenizer.O200kBase
	case strings.HasPrefix(m, "gpt-4"), strings.HasPrefix(m, "gpt-3.5"), strings.HasPrefix(m, "gpt-35"),
		strings.HasPrefix(m, "text-embedding-"):
		return tokenizer.Cl100kBase
	}
	return tokenizer.O200kBase
}

// counter accumulates one request's estimate.
type counter struct {
	codec     tokenizer.Codec
	factor    float64 // applied to tokenizer counts (Anthropic)
	limit     int     // bytes left to tokenize
	overLimit bool
	tokens    float64 // tokenizer counts × factor, overheads
	fixed     int64   // images
	chars     int64
	images    int
}

func (e *Estimator) counter(v vendors.Vendor, model string) *counter {
	c := &counter{codec: codecFor(EncodingFor(model)), factor: 1, limit: e.TokenizeLimit}
	if c.limit <= 0 {
		c.limit = DefaultTokenizeLimit
	}
	if v == vendors.Anthropic {
		c.factor = e.AnthropicFactor
		if c.factor <= 0 {
			c.factor = DefaultAnthropicFactor
		}
	}
	return c
}

func (c *counter) total() int64 {
	return int64(math.Ceil(c.tokens)) + c.fixed
}

// text counts a string of prompt text.
func (c *counter) text(s string) {
	if s == "" {
		return
	}
	c.chars += int64(utf8.RuneCountInString(s))
	if len(s) > c.limit {
		c.overLimit = true
		c.tokens += fallbackTokens(len(s)) * c.factor
		return
	}
	c.limit -= len(s)
	n, err := c.codec.Count(s)
	if err != nil {
		c.tokens += fallbackTokens(len(s)) * c.factor
		return
	}
	c.tokens += float64(n) * c.factor
}

// fallbackTokens estimates text of n bytes that is not tokenized.
func fallbackTokens(n int) float64 { return math.Ceil(float64(2*n) / 5) }

// json counts a raw JSON value (tool definitions) as its compact text.
func (c *counter) json(raw json.RawMessage) {
	if len(raw) == 0 || string(raw) == "null" {
		return
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		c.text(string(raw))
		return
	}
	c.text(b.String())
}

// system counts a system prompt or instructions: a string, or Anthropic's
// content blocks.
func (c *counter) system(raw json.RawMessage) {
	if len(raw) == 0 || string(raw) == "null" {
		return
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return
	}
	c.tokens += tokensPerMessage
	c.walk(v, "", 0)
}

// messages counts a messages array (or the Responses API's input, a string
// or an array of items).
func (c *counter) messages(raw json.RawMessage) {
	if len(raw) == 0 || string(raw) == "null" {
		return
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return
	}
	items, ok := v.([]any)
	if !ok {
		c.tokens += tokensPerMessage
		c.walk(v, "", 0)
		return
	}
	for _, it := range items {
		c.tokens += tokensPerMessage
		if m, ok := it.(map[string]any); ok {
			if _, named := m["name"].(string); named {
				c.tokens += tokensPerName
			}
		}
		c.walk(it, "", 0)
	}
}

// embeddings counts an embeddings input: a string, strings, or token ids.
func (c *counter) embeddings(raw json.RawMessage) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return
	}
	switch x := v.(type) {
	case string:
		c.text(x)
	case []any:
		for _, e := range x {
			switch y := e.(type) {
			case string:
				c.text(y)
			case float64:
				c.fixed++ // one token id
			case []any:
				c.fixed += int64(len(y))
			}
		}
	}
}

// structural names keys whose string values are not prompt text.
func structural(key string) bool {
	switch key {
	case "type", "role", "id", "tool_call_id", "tool_use_id", "call_id", "status", "detail",
		"media_type", "cache_control", "signature", "data", "file_data", "file_id", "url", "image_url", "format":
		return true
	}
	return false
}

// walk counts the prompt text in a decoded JSON value found under key.
func (c *counter) walk(v any, key string, depth int) {
	if depth > 64 {
		return
	}
	switch x := v.(type) {
	case string:
		if !structural(key) {
			c.text(x)
		}
	case []any:
		for _, e := range x {
			c.walk(e, key, depth+1)
		}
	case map[string]any:
		if n, ok := c.image(x); ok {
			c.images++
			c.fixed += n
			return
		}
		for k, e := range x {
			switch {
			case k == "name":
				if s, ok := e.(string); ok {
					c.text(s)
				}
			case (k == "input" || k == "arguments") && isObject(e):
				// A tool call's arguments as an object (Anthropic
				// tool_use): the model reads them as JSON.
				b, _ := json.Marshal(e)
				c.text(string(b))
			case k == "cache_control":
			default:
				c.walk(e, k, depth+1)
			}
		}
	}
}

func isObject(v any) bool { _, ok := v.(map[string]any); return ok }

// String returns a one-line summary, e.g. "chat.completions gpt-4o: 123
// input tokens (exact), 456 characters, max 100 × 1, 0 images".
func (e Estimate) String() string {
	how := "exact"
	if !e.Exact {
		how = "partly from length"
	}
	return fmt.Sprintf("%s %s: %d input tokens (%s), %d characters, max %d × %d, %d images",
		e.API, e.Model, e.InputTokens, how, e.Characters, e.MaxOutputTokens, e.N, e.Images)
}
