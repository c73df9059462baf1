package transport

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ontopix/sluice/vendors"
)

// trackAll feeds body to a fresh tracker in chunks of n bytes.
func trackAll(api API, stream bool, body string, n int) *usageTracker {
	t := &usageTracker{}
	t.init(api, stream)
	for len(body) > 0 {
		k := min(n, len(body))
		t.write([]byte(body[:k]))
		body = body[k:]
	}
	t.eof()
	return t
}

const anthropicStream = "event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":12,\"cache_creation_input_tokens\":3,\"cache_read_input_tokens\":4,\"output_tokens\":1}}}\r\n\r\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"abcdefgh\"}}\n\n" +
	": a comment\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":9}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

const chatStream = "data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"abcd\"}}],\"usage\":null}\n\n" +
	"data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"efgh\\\"ij\"}}]}\n\n" +
	"data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":2}}}\n\n" +
	"data: [DONE]\n\n"

const responsesStream = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n" +
	"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"abcdefgh\"}\n\n" +
	"event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"text\":\"abcdefgh\"}\n\n" +
	"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"output\":[{\"content\":[{\"text\":\"abcdefgh\"}]}],\"usage\":{\"input_tokens\":7,\"output_tokens\":2,\"input_tokens_details\":{\"cached_tokens\":1}}}}\n\n"

func TestUsageTracker(t *testing.T) {
	tests := []struct {
		name     string
		api      API
		stream   bool
		body     string
		want     vendors.Usage
		complete bool
		text     int64
	}{
		{"anthropic stream", Messages, true, anthropicStream, vendors.Usage{Input: 12, Output: 9, CacheCreation: 3, CacheRead: 4}, true, 8},
		{"chat stream", ChatCompletions, true, chatStream, vendors.Usage{Input: 5, Output: 3, CacheRead: 2}, true, 12},
		{"responses stream", Responses, true, responsesStream, vendors.Usage{Input: 7, Output: 2, CacheRead: 1}, true, 8},
		{"chat json", ChatCompletions, false, `{"choices":[{"message":{"content":"x","usage":{"prompt_tokens":99}}}],"usage":{"prompt_tokens":4,"completion_tokens":6}}`, vendors.Usage{Input: 4, Output: 6}, true, 1},
		{"embeddings json", Embeddings, false, `{"data":[{"embedding":[0.1,0.2]}],"usage":{"prompt_tokens":3,"total_tokens":3}}`, vendors.Usage{Input: 3}, true, 0},
		{"cut short", Messages, true, anthropicStream[:strings.Index(anthropicStream, ": a comment")], vendors.Usage{Input: 12, Output: 1, CacheCreation: 3, CacheRead: 4}, false, 8},
		{"not json", ChatCompletions, false, `<html>oops</html>`, vendors.Usage{}, false, 0},
	}
	for _, tt := range tests {
		for _, n := range []int{1, 3, 7, 64, 1 << 20} {
			tr := trackAll(tt.api, tt.stream, tt.body, n)
			if tr.usage != tt.want || tr.complete != tt.complete {
				t.Errorf("%s in chunks of %d: usage %+v complete %v, want %+v %v", tt.name, n, tr.usage, tr.complete, tt.want, tt.complete)
			}
			if tr.textBytes != tt.text && tt.stream {
				t.Errorf("%s in chunks of %d: %d text bytes, want %d", tt.name, n, tr.textBytes, tt.text)
			}
		}
	}
}

// A usage object over the capture limit is ignored, not truncated.
func TestScanCaptureLimit(t *testing.T) {
	big := `{"usage":{"prompt_tokens":1,"pad":"` + strings.Repeat("x", maxCapture) + `"}}`
	tr := trackAll(ChatCompletions, false, big, 512)
	if tr.haveIn || tr.complete {
		t.Errorf("an oversized usage was read: %+v", tr.usage)
	}
}

// FuzzUsageJSON checks the scanner against encoding/json on JSON bodies:
// whatever the chunking, the usage it finds is the top-level one.
func FuzzUsageJSON(f *testing.F) {
	f.Add(`{"usage":{"prompt_tokens":4,"completion_tokens":6}}`, 3)
	f.Add(`{"a":[{"usage":{"prompt_tokens":1}}],"usage":{"input_tokens":2,"output_tokens":3}}`, 1)
	f.Add(`{"usage":null}`, 5)
	f.Add(`{"k":"\"usage\":{","usage":{"prompt_tokens":7}}`, 2)
	f.Add(`[{"usage":{"prompt_tokens":7}}]`, 4)
	f.Fuzz(func(t *testing.T, body string, n int) {
		if n < 1 || n > 1<<16 {
			n = 1 + (n&0xff+256)%256
		}
		tr := trackAll(ChatCompletions, false, body, n)
		var doc struct {
			Usage json.RawMessage `json:"usage"`
		}
		if json.Unmarshal([]byte(body), &doc) != nil || !json.Valid([]byte(body)) || len(doc.Usage) > maxCapture-64 {
			return // the scanner's answer on invalid or oversized input is not specified
		}
		var w wireUsage
		if json.Unmarshal(doc.Usage, &w) != nil || w.PromptTokens == nil || *w.PromptTokens < 0 || w.InputTokens != nil {
			return
		}
		if !tr.haveIn || tr.usage.Input != *w.PromptTokens {
			t.Fatalf("body %q: scanner input %d (have %v), encoding/json %d", body, tr.usage.Input, tr.haveIn, *w.PromptTokens)
		}
	})
}

// FuzzSSE checks that the stream parser's result does not depend on how
// the stream is cut into reads, and that it never panics.
func FuzzSSE(f *testing.F) {
	f.Add(anthropicStream, 1, uint8(Messages))
	f.Add(chatStream, 5, uint8(ChatCompletions))
	f.Add(responsesStream, 13, uint8(Responses))
	f.Add("data: {\"usage\":{\"prompt_tokens\":1}}\r\rdata\n\n", 2, uint8(ChatCompletions))
	f.Fuzz(func(t *testing.T, stream string, n int, api uint8) {
		a := API(api%4 + 1)
		if n < 1 || n > len(stream)+1 {
			n = 1 + (n&0x3f+64)%64
		}
		whole := trackAll(a, true, stream, len(stream)+1)
		parts := trackAll(a, true, stream, n)
		if whole.usage != parts.usage || whole.complete != parts.complete || whole.textBytes != parts.textBytes {
			t.Fatalf("chunks of %d: %+v %v %d; whole: %+v %v %d", n, parts.usage, parts.complete, parts.textBytes,
				whole.usage, whole.complete, whole.textBytes)
		}
	})
}
