package transport

import (
	"encoding/json"

	"github.com/ontopix/sluice/vendors"
)

// wireUsage is every usage field the known APIs report: OpenAI chat
// completions and embeddings (prompt_tokens, completion_tokens,
// prompt_tokens_details.cached_tokens), the Responses API (input_tokens,
// output_tokens, input_tokens_details.cached_tokens) and Anthropic
// (input_tokens, output_tokens, cache_creation_input_tokens,
// cache_read_input_tokens).
type wireUsage struct {
	PromptTokens     *int64 `json:"prompt_tokens"`
	CompletionTokens *int64 `json:"completion_tokens"`
	InputTokens      *int64 `json:"input_tokens"`
	OutputTokens     *int64 `json:"output_tokens"`
	CacheCreation    *int64 `json:"cache_creation_input_tokens"`
	CacheRead        *int64 `json:"cache_read_input_tokens"`
	PromptDetails    *struct {
		CachedTokens *int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	InputDetails *struct {
		CachedTokens *int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

// usageTracker reads a response body as it passes, JSON or a server-sent
// event stream, and keeps the usage it reports. Its memory is fixed: a
// jsonScan, an sseParser and a few counters.
type usageTracker struct {
	api    API
	stream bool
	scan   jsonScan
	sse    sseParser

	usage     vendors.Usage
	haveIn    bool // the input count is known
	haveOut   bool // the output count is known
	complete  bool // the final usage was seen
	eventUse  bool // the current event carried usage
	textBytes int64
}

// init prepares t for a response to api, a stream when stream is set.
func (t *usageTracker) init(api API, stream bool) {
	t.api, t.stream = api, stream
	t.scan.found = t.found
	t.sse.scan, t.sse.event = &t.scan, t.event
}

// write reads the next part of the body.
func (t *usageTracker) write(p []byte) {
	if t.stream {
		t.sse.write(p)
		return
	}
	t.scan.write(p)
}

// eof marks the end of the body: a JSON body's usage is then final.
func (t *usageTracker) eof() {
	if !t.stream && (t.haveIn || t.haveOut) {
		t.complete = true
	}
}

// found merges one usage object: later fields override earlier ones, as
// Anthropic's message_delta follows message_start.
func (t *usageTracker) found(raw []byte) {
	var w wireUsage
	if json.Unmarshal(raw, &w) != nil {
		return
	}
	t.eventUse = true
	set := func(dst *int64, v *int64, have *bool) {
		if v != nil && *v >= 0 {
			*dst = *v
			if have != nil {
				*have = true
			}
		}
	}
	set(&t.usage.Input, w.PromptTokens, &t.haveIn)
	set(&t.usage.Input, w.InputTokens, &t.haveIn)
	set(&t.usage.Output, w.CompletionTokens, &t.haveOut)
	set(&t.usage.Output, w.OutputTokens, &t.haveOut)
	set(&t.usage.CacheCreation, w.CacheCreation, nil)
	set(&t.usage.CacheRead, w.CacheRead, nil)
	if w.PromptDetails != nil {
		set(&t.usage.CacheRead, w.PromptDetails.CachedTokens, nil)
	}
	if w.InputDetails != nil {
		set(&t.usage.CacheRead, w.InputDetails.CachedTokens, nil)
	}
}

// event ends one stream event.
func (t *usageTracker) event(name []byte) {
	typ := t.scan.typeName()
	if len(typ) == 0 {
		typ = name
	}
	switch t.api {
	case ChatCompletions:
		t.textBytes += t.scan.textBytes
		if t.eventUse {
			t.complete = true
		}
	case Responses:
		if hasSuffix(typ, ".delta") {
			t.textBytes += t.scan.textBytes
		}
		if t.eventUse && (eq(typ, "response.completed") || eq(typ, "response.incomplete") || eq(typ, "response.failed")) {
			t.complete = true
		}
	case Messages:
		if eq(typ, "content_block_delta") {
			t.textBytes += t.scan.textBytes
		}
		if t.eventUse && eq(typ, "message_delta") {
			t.complete = true
		}
	}
	t.eventUse = false
}

func eq(b []byte, s string) bool { return string(b) == s }

func hasSuffix(b []byte, s string) bool {
	return len(b) >= len(s) && string(b[len(b)-len(s):]) == s
}

// partialOutput estimates the output of a stream cut short from the text
// received: one token per 4 bytes, rounded up.
func (t *usageTracker) partialOutput() int64 { return (t.textBytes + 3) / 4 }
