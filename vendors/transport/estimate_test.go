package transport_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	"image/png"
	"testing"

	"github.com/tiktoken-go/tokenizer"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
)

func pngB64(t testing.TB, w, h int) string {
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

func TestEstimate(t *testing.T) {
	img := pngB64(t, 1024, 1024)
	tests := []struct {
		name   string
		vendor vendors.Vendor
		path   string
		body   string
		want   int64 // input tokens
	}{
		// "hello there" is 2 tokens in o200k_base: 2 + 3 per message + 3.
		{"chat", vendors.OpenAI, "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hello there"}]}`, 8},
		{"chat named", vendors.OpenAI, "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","name":"bob","content":"hello there"}]}`, 10},
		{"responses string", vendors.OpenAI, "/v1/responses", `{"model":"gpt-4o","input":"hello there"}`, 8},
		{"embeddings", vendors.OpenAI, "/v1/embeddings", `{"model":"text-embedding-3-small","input":["hello there","hello there"]}`, 4},
		{"embeddings ids", vendors.OpenAI, "/v1/embeddings", `{"model":"text-embedding-3-small","input":[[1,2,3],[4]]}`, 4},
		// 2 × 1.2 + 6, rounded up.
		{"anthropic", vendors.Anthropic, "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hello there"}]}`, 9},
		// 1024×1024 at high detail: scaled to 768×768, 4 tiles: 765.
		{"openai image", vendors.OpenAI, "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,` + img + `"}}]}]}`, 765 + 6},
		{"openai image low", vendors.OpenAI, "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}}]}]}`, 85 + 6},
		{"openai image url", vendors.OpenAI, "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`, 765 + 6},
		// 1024×1024 / 750 = 1398.1 → 1399.
		{"anthropic image", vendors.Anthropic, "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + img + `"}}]}]}`, 1399 + 6},
		{"anthropic image url", vendors.Anthropic, "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]}]}`, 1600 + 6},
	}
	for _, tt := range tests {
		got, err := transport.EstimateFor(tt.vendor, tt.path, []byte(tt.body))
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if got.InputTokens != tt.want {
			t.Errorf("%s: %d input tokens, want %d (%s)", tt.name, got.InputTokens, tt.want, got)
		}
	}
}

func TestEstimateErrors(t *testing.T) {
	for _, tt := range []struct{ path, body, field string }{
		{"/v1/chat/completions", `not json`, "body"},
		{"/v1/chat/completions", `{"model":"gpt-4o","max_tokens":-1,"messages":[]}`, "max_tokens"},
		{"/v1/chat/completions", `{"model":"gpt-4o","n":0,"messages":[]}`, "n"},
		{"/v1/models", `{}`, "path"},
	} {
		_, err := transport.EstimateFor(vendors.OpenAI, tt.path, []byte(tt.body))
		var fe *sluice.FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field || !errors.Is(err, sluice.ErrInvalid) {
			t.Errorf("%s %s: error %v, want a FieldError naming %s", tt.path, tt.body, err, tt.field)
		}
	}
}

// The encodings are compiled in: both load without any network access.
func TestEncodingsOffline(t *testing.T) {
	for _, enc := range []tokenizer.Encoding{tokenizer.O200kBase, tokenizer.Cl100kBase} {
		c, err := tokenizer.Get(enc)
		if err != nil {
			t.Fatalf("%s: %v", enc, err)
		}
		if n, err := c.Count("hello there"); err != nil || n != 2 {
			t.Errorf("%s: %d tokens (%v), want 2", enc, n, err)
		}
	}
	if got := transport.EncodingFor("gpt-4-turbo"); got != tokenizer.Cl100kBase {
		t.Errorf("gpt-4-turbo: %s", got)
	}
	if got := transport.EncodingFor("gpt-4o-mini"); got != tokenizer.O200kBase {
		t.Errorf("gpt-4o-mini: %s", got)
	}
}

func FuzzEstimate(f *testing.F) {
	f.Add("/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function"}]}`)
	f.Add("/v1/messages", `{"model":"c","max_tokens":5,"system":[{"type":"text","text":"be brief"}],"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"42"}]}]}`)
	f.Add("/v1/responses", `{"model":"gpt-4o","input":[{"type":"function_call_output","call_id":"c","output":"ok"}]}`)
	f.Add("/v1/embeddings", `{"model":"m","input":[[1,2],"x"]}`)
	f.Add("/v1/chat/completions", `{"messages":[{"content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]}`)
	f.Fuzz(func(t *testing.T, path, body string) {
		for _, v := range []vendors.Vendor{vendors.OpenAI, vendors.Anthropic} {
			e, err := transport.EstimateFor(v, path, []byte(body))
			if err != nil {
				if !errors.Is(err, sluice.ErrInvalid) {
					t.Fatalf("error %v does not match ErrInvalid", err)
				}
				continue
			}
			if e.InputTokens < 0 || e.Characters < 0 || e.N < 1 || e.MaxOutputTokens < 0 {
				t.Fatalf("estimate %s", fmt.Sprint(e))
			}
		}
	})
}
