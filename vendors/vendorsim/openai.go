package vendorsim

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"strings"
)

// OpenAI wire types: only the fields the official SDKs read.

type oaUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

type oaMessage struct {
	Role    string  `json:"role"`
	Content string  `json:"content"`
	Refusal *string `json:"refusal"`
}

type oaChoice struct {
	Index        int        `json:"index"`
	Message      *oaMessage `json:"message,omitempty"`
	Delta        *oaDelta   `json:"delta,omitempty"`
	Logprobs     *struct{}  `json:"logprobs"`
	FinishReason *string    `json:"finish_reason"`
}

type oaDelta struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content"`
}

type oaCompletion struct {
	ID                string     `json:"id"`
	Object            string     `json:"object"`
	Created           int64      `json:"created"`
	Model             string     `json:"model"`
	SystemFingerprint string     `json:"system_fingerprint"`
	Choices           []oaChoice `json:"choices"`
	Usage             *oaUsage   `json:"usage"`
}

type oaErrorBody struct {
	Error oaError `json:"error"`
}

type oaError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func strp(s string) *string { return &s }

func (x *exchange) usage() *oaUsage {
	return &oaUsage{PromptTokens: x.c.input, CompletionTokens: x.produced, TotalTokens: x.c.input + x.produced}
}

func (x *exchange) finishReason() string {
	if x.truncated {
		return "length"
	}
	return "stop"
}

func (x *exchange) chat(ctx context.Context, w http.ResponseWriter) {
	w.Header().Set("X-Request-Id", fmt.Sprintf("req_sim_%d", x.seq))
	base := oaCompletion{ID: fmt.Sprintf("chatcmpl-sim%d", x.seq), Created: x.created.Unix(), Model: x.c.model,
		SystemFingerprint: "fp_vendorsim"}
	if !x.c.stream {
		var text strings.Builder
		if !x.produce(ctx, false, func(t string) error { text.WriteString(t); return nil }) {
			return
		}
		x.finish()
		base.Object = "chat.completion"
		base.Choices = []oaChoice{{Message: &oaMessage{Role: "assistant", Content: text.String()}, FinishReason: strp(x.finishReason())}}
		base.Usage = x.usage()
		writeJSON(w, http.StatusOK, base)
		return
	}
	base.Object = "chat.completion.chunk"
	ev := startSSE(w)
	chunk := func(d *oaDelta, finish *string) error {
		c := base
		c.Choices = []oaChoice{{Delta: d, FinishReason: finish}}
		return ev.event("", c)
	}
	if chunk(&oaDelta{Role: "assistant"}, nil) != nil {
		return
	}
	if !x.produce(ctx, true, func(t string) error { return chunk(&oaDelta{Content: t}, nil) }) {
		return
	}
	x.finish()
	if chunk(&oaDelta{}, strp(x.finishReason())) != nil {
		return
	}
	if x.c.includeUsage {
		c := base
		c.Choices = []oaChoice{}
		c.Usage = x.usage()
		if ev.event("", c) != nil {
			return
		}
	}
	_ = ev.raw("", []byte("[DONE]"))
}

// Responses API.

type rsUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

type rsContent struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

type rsItem struct {
	Type    string      `json:"type"`
	ID      string      `json:"id"`
	Status  string      `json:"status"`
	Role    string      `json:"role"`
	Content []rsContent `json:"content"`
}

type rsResponse struct {
	ID                string   `json:"id"`
	Object            string   `json:"object"`
	CreatedAt         int64    `json:"created_at"`
	Status            string   `json:"status"`
	Model             string   `json:"model"`
	Output            []rsItem `json:"output"`
	ParallelToolCalls bool     `json:"parallel_tool_calls"`
	Tools             []any    `json:"tools"`
	ToolChoice        string   `json:"tool_choice"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	MaxOutputTokens *int64   `json:"max_output_tokens"`
	Usage           *rsUsage `json:"usage"`
}

type rsEvent struct {
	Type           string      `json:"type"`
	SequenceNumber int         `json:"sequence_number"`
	Response       *rsResponse `json:"response,omitempty"`
	OutputIndex    *int        `json:"output_index,omitempty"`
	ContentIndex   *int        `json:"content_index,omitempty"`
	ItemID         string      `json:"item_id,omitempty"`
	Item           *rsItem     `json:"item,omitempty"`
	Part           *rsContent  `json:"part,omitempty"`
	Delta          *string     `json:"delta,omitempty"`
	Text           *string     `json:"text,omitempty"`
	Logprobs       []any       `json:"logprobs,omitempty"`
}

func (x *exchange) responses(ctx context.Context, w http.ResponseWriter) {
	w.Header().Set("X-Request-Id", fmt.Sprintf("req_sim_%d", x.seq))
	itemID := fmt.Sprintf("msg_sim%d", x.seq)
	resp := &rsResponse{ID: fmt.Sprintf("resp_sim%d", x.seq), Object: "response", CreatedAt: x.created.Unix(),
		Status: "in_progress", Model: x.c.model, Output: []rsItem{}, Tools: []any{}, ToolChoice: "auto",
		ParallelToolCalls: true}
	if x.c.maxTokens > 0 {
		resp.MaxOutputTokens = &x.c.maxTokens
	}
	complete := func(text string) {
		resp.Status = "completed"
		if x.truncated {
			resp.Status = "incomplete"
			resp.IncompleteDetails = &struct {
				Reason string `json:"reason"`
			}{"max_output_tokens"}
		}
		resp.Output = []rsItem{{Type: "message", ID: itemID, Status: "completed", Role: "assistant",
			Content: []rsContent{{Type: "output_text", Text: text, Annotations: []any{}}}}}
		u := x.usage()
		resp.Usage = &rsUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	}
	var text strings.Builder
	if !x.c.stream {
		if !x.produce(ctx, false, func(t string) error { text.WriteString(t); return nil }) {
			return
		}
		x.finish()
		complete(text.String())
		writeJSON(w, http.StatusOK, resp)
		return
	}
	ev := startSSE(w)
	seq := 0
	send := func(e rsEvent) error {
		e.SequenceNumber = seq
		seq++
		return ev.event(e.Type, e)
	}
	zero := 0
	item := &rsItem{Type: "message", ID: itemID, Status: "in_progress", Role: "assistant", Content: []rsContent{}}
	part := &rsContent{Type: "output_text", Annotations: []any{}}
	for _, e := range []rsEvent{
		{Type: "response.created", Response: resp},
		{Type: "response.output_item.added", OutputIndex: &zero, Item: item},
		{Type: "response.content_part.added", OutputIndex: &zero, ContentIndex: &zero, ItemID: itemID, Part: part},
	} {
		if send(e) != nil {
			return
		}
	}
	if !x.produce(ctx, true, func(t string) error {
		text.WriteString(t)
		return send(rsEvent{Type: "response.output_text.delta", OutputIndex: &zero, ContentIndex: &zero, ItemID: itemID, Delta: &t, Logprobs: []any{}})
	}) {
		return
	}
	x.finish()
	full := text.String()
	complete(full)
	done := resp.Output[0]
	for _, e := range []rsEvent{
		{Type: "response.output_text.done", OutputIndex: &zero, ContentIndex: &zero, ItemID: itemID, Text: &full, Logprobs: []any{}},
		{Type: "response.content_part.done", OutputIndex: &zero, ContentIndex: &zero, ItemID: itemID, Part: &done.Content[0]},
		{Type: "response.output_item.done", OutputIndex: &zero, Item: &done},
		{Type: "response.completed", Response: resp},
	} {
		if send(e) != nil {
			return
		}
	}
}

// Embeddings API.

type embData struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

func (x *exchange) embeddings(ctx context.Context, w http.ResponseWriter) {
	w.Header().Set("X-Request-Id", fmt.Sprintf("req_sim_%d", x.seq))
	if !x.produce(ctx, false, func(string) error { return nil }) {
		return
	}
	x.finish()
	const dims = 8
	data := make([]embData, x.c.inputs)
	for i := range data {
		v := make([]float32, dims)
		for j := range v {
			v[j] = float32(x.rng.Float64()*2 - 1)
		}
		data[i] = embData{Object: "embedding", Index: i, Embedding: v}
		if x.c.base64 {
			buf := make([]byte, 4*dims)
			for j, f := range v {
				binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(f))
			}
			data[i].Embedding = base64.StdEncoding.EncodeToString(buf)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "model": x.c.model,
		"usage": map[string]int64{"prompt_tokens": x.c.input, "total_tokens": x.c.input}})
}
