package vendorsim

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// Anthropic wire types: only the fields the official SDKs read.

type anUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
}

type anBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anMessage struct {
	ID           string    `json:"id"`
	Type         string    `json:"type"`
	Role         string    `json:"role"`
	Model        string    `json:"model"`
	Content      []anBlock `json:"content"`
	StopReason   *string   `json:"stop_reason"`
	StopSequence *string   `json:"stop_sequence"`
	Usage        anUsage   `json:"usage"`
}

type anEvent struct {
	Type         string     `json:"type"`
	Message      *anMessage `json:"message,omitempty"`
	Index        *int       `json:"index,omitempty"`
	ContentBlock *anBlock   `json:"content_block,omitempty"`
	Delta        any        `json:"delta,omitempty"`
	Usage        *anUsage   `json:"usage,omitempty"`
}

type anTextDelta struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anStop struct {
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

func (x *exchange) anUsage(output int64) anUsage {
	return anUsage{InputTokens: x.c.input - x.ctl.cacheRead - x.ctl.cacheCreate,
		CacheCreationInputTokens: x.ctl.cacheCreate, CacheReadInputTokens: x.ctl.cacheRead, OutputTokens: output}
}

func (x *exchange) stopReason() *string {
	if x.truncated {
		return strp("max_tokens")
	}
	return strp("end_turn")
}

func (x *exchange) messages(ctx context.Context, w http.ResponseWriter) {
	w.Header().Set("Request-Id", fmt.Sprintf("req_sim_%d", x.seq))
	msg := &anMessage{ID: fmt.Sprintf("msg_sim%d", x.seq), Type: "message", Role: "assistant", Model: x.c.model,
		Content: []anBlock{}}
	if !x.c.stream {
		var text strings.Builder
		if !x.produce(ctx, false, func(t string) error { text.WriteString(t); return nil }) {
			return
		}
		x.finish()
		msg.Content = []anBlock{{Type: "text", Text: text.String()}}
		msg.StopReason = x.stopReason()
		msg.Usage = x.anUsage(x.produced)
		writeJSON(w, http.StatusOK, msg)
		return
	}
	ev := startSSE(w)
	zero := 0
	msg.Usage = x.anUsage(min(1, x.out))
	if ev.event("message_start", anEvent{Type: "message_start", Message: msg}) != nil ||
		ev.event("content_block_start", anEvent{Type: "content_block_start", Index: &zero, ContentBlock: &anBlock{Type: "text"}}) != nil {
		return
	}
	if !x.produce(ctx, true, func(t string) error {
		return ev.event("content_block_delta", anEvent{Type: "content_block_delta", Index: &zero, Delta: anTextDelta{Type: "text_delta", Text: t}})
	}) {
		return
	}
	x.finish()
	u := x.anUsage(x.produced)
	for _, e := range []anEvent{
		{Type: "content_block_stop", Index: &zero},
		{Type: "message_delta", Delta: anStop{StopReason: x.stopReason()}, Usage: &u},
		{Type: "message_stop"},
	} {
		if ev.event(e.Type, e) != nil {
			return
		}
	}
}
