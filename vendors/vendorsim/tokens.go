package vendorsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The APIs a Sim serves, by request path.
const (
	PathChatCompletions = "/v1/chat/completions"
	PathResponses       = "/v1/responses"
	PathEmbeddings      = "/v1/embeddings"
	PathMessages        = "/v1/messages"
)

// api identifies the API a request was made to.
type api int

const (
	apiChat api = iota
	apiResponses
	apiEmbeddings
	apiMessages
)

// ErrBadRequest is matched by every error InputTokens returns for a body
// the Sim would answer with 400.
var ErrBadRequest = errors.New("vendorsim: invalid request")

// CountTokens returns the Sim's token count of text: its UTF-8 length in
// bytes divided by 4, rounded up. The Sim's output filler has exactly 4
// bytes per token.
func CountTokens(text string) int64 { return (int64(len(text)) + 3) / 4 }

// InputTokens returns the number of input tokens the Sim counts for a
// request body sent to path (PathChatCompletions, PathResponses,
// PathEmbeddings or PathMessages): ceil(B / 4), where B is the UTF-8 length
// in bytes of every string reachable through the fields "content", "text",
// "input" and "arguments" of messages (OpenAI "messages", Responses
// "input", Embeddings "input", Anthropic "messages"), plus the system
// prompt ("system", "instructions", the same way), plus the compact JSON of
// "tools". Embeddings given as token arrays count one token per element.
// Cached tokens are part of this count (see the Anthropic cache headers).
func InputTokens(path string, body []byte) (int64, error) {
	a, ok := apiOf(path)
	if !ok {
		return 0, fmt.Errorf("path %q: not an API the simulator serves: %w", path, ErrBadRequest)
	}
	c, err := parseCall(a, body)
	if err != nil {
		return 0, err
	}
	return c.input, nil
}

func apiOf(path string) (api, bool) {
	switch {
	case path == PathChatCompletions || strings.HasSuffix(path, "/chat/completions"):
		return apiChat, true
	case path == PathResponses || strings.HasSuffix(path, "/responses"):
		return apiResponses, true
	case path == PathEmbeddings || strings.HasSuffix(path, "/embeddings"):
		return apiEmbeddings, true
	case path == PathMessages:
		return apiMessages, true
	}
	return 0, false
}

// call is a parsed request: what the limits and the response need.
type call struct {
	api          api
	model        string
	input        int64 // every input token, cached ones included
	maxTokens    int64 // 0: the request set none
	bestOf       int64 // Azure's best_of, at least 1
	stream       bool
	includeUsage bool // OpenAI chat stream_options.include_usage
	base64       bool // embeddings encoding_format "base64"
	inputs       int  // embeddings: the number of inputs
}

type wireRequest struct {
	Model               string          `json:"model"`
	Messages            json.RawMessage `json:"messages"`
	Input               json.RawMessage `json:"input"`
	System              json.RawMessage `json:"system"`
	Instructions        json.RawMessage `json:"instructions"`
	Tools               json.RawMessage `json:"tools"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	MaxOutputTokens     *int64          `json:"max_output_tokens"`
	BestOf              *int64          `json:"best_of"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	EncodingFormat string `json:"encoding_format"`
}

func badRequest(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, ErrBadRequest)...)
}

// parseCall reads a request body for API a.
func parseCall(a api, body []byte) (*call, error) {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, badRequest("the body is not a valid JSON request: %v", err)
	}
	if w.Model == "" {
		return nil, badRequest("model: missing")
	}
	c := &call{api: a, model: w.Model, stream: w.Stream, bestOf: 1}
	var b int64
	var err error
	switch a {
	case apiChat, apiMessages:
		if len(w.Messages) == 0 || string(w.Messages) == "null" {
			return nil, badRequest("messages: missing")
		}
		b, err = textBytes(w.Messages)
	case apiResponses:
		if len(w.Input) == 0 || string(w.Input) == "null" {
			return nil, badRequest("input: missing")
		}
		b, err = textBytes(w.Input)
	case apiEmbeddings:
		return parseEmbeddings(c, w)
	}
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"system", w.System}, {"instructions", w.Instructions}} {
		n, err := textBytes(f.raw)
		if err != nil {
			return nil, badRequest("%s: %v", f.name, err)
		}
		b += n
	}
	if len(w.Tools) > 0 && string(w.Tools) != "null" {
		var buf bytes.Buffer
		if err := json.Compact(&buf, w.Tools); err != nil {
			return nil, badRequest("tools: %v", err)
		}
		b += int64(buf.Len())
	}
	c.input = (b + 3) / 4
	if err := c.setMax(w); err != nil {
		return nil, err
	}
	if w.StreamOptions != nil {
		c.includeUsage = w.StreamOptions.IncludeUsage
	}
	return c, nil
}

// setMax reads the request's max tokens.
func (c *call) setMax(w wireRequest) error {
	name, v := "", (*int64)(nil)
	switch c.api {
	case apiChat:
		name, v = "max_tokens", w.MaxTokens
		if w.MaxCompletionTokens != nil {
			name, v = "max_completion_tokens", w.MaxCompletionTokens
		}
	case apiResponses:
		name, v = "max_output_tokens", w.MaxOutputTokens
	case apiMessages:
		name, v = "max_tokens", w.MaxTokens
		if v == nil {
			return badRequest("max_tokens: missing")
		}
	}
	if v != nil {
		if *v < 1 || *v > 10_000_000 {
			return badRequest("%s: %d: must be between 1 and 10000000", name, *v)
		}
		c.maxTokens = *v
	}
	if w.BestOf != nil {
		if *w.BestOf < 1 || *w.BestOf > 20 {
			return badRequest("best_of: %d: must be between 1 and 20", *w.BestOf)
		}
		c.bestOf = *w.BestOf
	}
	return nil
}

func parseEmbeddings(c *call, w wireRequest) (*call, error) {
	var one string
	if err := json.Unmarshal(w.Input, &one); err == nil {
		c.input, c.inputs = CountTokens(one), 1
	} else {
		var many []json.RawMessage
		if err := json.Unmarshal(w.Input, &many); err != nil || len(many) == 0 {
			return nil, badRequest("input: must be a string or a non-empty array")
		}
		for i, raw := range many {
			var s string
			var ids []int64
			switch {
			case json.Unmarshal(raw, &s) == nil:
				c.input += CountTokens(s)
			case json.Unmarshal(raw, &ids) == nil:
				c.input += int64(len(ids))
			case i == 0:
				// An array of token ids: one input.
				var id int64
				if err := json.Unmarshal(raw, &id); err != nil {
					return nil, badRequest("input[%d]: must be a string or an array of token ids", i)
				}
				c.input, c.inputs = int64(len(many)), 1
				c.base64 = w.EncodingFormat == "base64"
				return c, nil
			default:
				return nil, badRequest("input[%d]: must be a string or an array of token ids", i)
			}
		}
		c.inputs = len(many)
	}
	c.base64 = w.EncodingFormat == "base64"
	return c, nil
}

// textBytes sums the lengths of the strings reachable through the
// counted fields of a JSON value.
func textBytes(raw json.RawMessage) (int64, error) {
	if len(raw) == 0 {
		return 0, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, badRequest("%v", err)
	}
	return walkText(v, 0), nil
}

func walkText(v any, depth int) int64 {
	if depth > 64 {
		return 0
	}
	switch x := v.(type) {
	case string:
		return int64(len(x))
	case []any:
		var n int64
		for _, e := range x {
			n += walkText(e, depth+1)
		}
		return n
	case map[string]any:
		var n int64
		for _, k := range []string{"content", "text", "input", "arguments"} {
			if e, ok := x[k]; ok {
				n += walkText(e, depth+1)
			}
		}
		return n
	}
	return 0
}
