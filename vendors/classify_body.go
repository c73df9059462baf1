package vendors

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// parsedBody is what parseBody found in an error body. Every field is
// optional.
type parsedBody struct {
	codes     []string // every code, type and status word found
	code      string   // the most specific of them
	message   string
	quotaID   string
	perDay    bool // a Gemini violation is a per-day quota
	metric    Metric
	limit     Count
	requested Count
	retry     RetryDelay
	problems  []error
}

// has reports whether the body carries any of the codes (case-insensitive).
func (b parsedBody) has(codes ...string) bool {
	for _, got := range b.codes {
		for _, want := range codes {
			if strings.EqualFold(got, want) {
				return true
			}
		}
	}
	return false
}

// mentions reports whether the message contains phrase (lower case).
func (b parsedBody) mentions(phrase string) bool {
	return strings.Contains(strings.ToLower(b.message), phrase)
}

type rawBody struct {
	Error  json.RawMessage `json:"error"`
	Detail json.RawMessage `json:"detail"`
}

type rawError struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
	Status  string          `json:"status"`
	Details json.RawMessage `json:"details"`
}

type rawDetail struct {
	Type       string `json:"@type"`
	RetryDelay string `json:"retryDelay"`
	ErrorCode  string `json:"error_code"`
	Violations []struct {
		QuotaMetric string `json:"quotaMetric"`
		QuotaID     string `json:"quotaId"`
	} `json:"violations"`
}

type rawElevenLabs struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// parseBody reads a vendor error body. Decoding errors are ignored: encoding/
// json fills what it can, and a body that is not JSON yields nothing.
func parseBody(body []byte) parsedBody {
	var b parsedBody
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' { // Gemini can wrap the error in an array.
		var list []json.RawMessage
		if json.Unmarshal(body, &list) != nil || len(list) == 0 {
			return b
		}
		body = list[0]
	}
	if len(body) == 0 || body[0] != '{' {
		return b
	}
	var raw rawBody
	_ = json.Unmarshal(body, &raw)
	var specific []string // most specific first
	if e, ok := decodeObject[rawError](raw.Error); ok {
		b.message = e.Message
		details := b.readDetails(e.Details)
		specific = append(specific, details...)
		if c := jsonString(e.Code); c != "" && !allDigits(c) {
			specific = append(specific, c)
		}
		specific = append(specific, e.Type, e.Status)
		if b.metric == "" {
			b.metric = metricFromType(e.Type)
		}
	} else if s := jsonString(raw.Error); s != "" {
		b.message = s
	}
	if d, ok := decodeObject[rawElevenLabs](raw.Detail); ok {
		specific = append([]string{d.Status}, specific...)
		if b.message == "" {
			b.message = d.Message
		}
	} else if s := jsonString(raw.Detail); s != "" && b.message == "" {
		b.message = s
	}
	for _, c := range specific {
		if c == "" {
			continue
		}
		b.codes = append(b.codes, c)
		if b.code == "" {
			b.code = c
		}
	}
	b.readMessage()
	return b
}

// readDetails reads Anthropic's details object or Gemini's details array and
// returns the codes found.
func (b *parsedBody) readDetails(raw json.RawMessage) []string {
	if d, ok := decodeObject[rawDetail](raw); ok {
		return []string{d.ErrorCode}
	}
	var list []rawDetail
	_ = json.Unmarshal(raw, &list)
	for i, d := range list {
		for _, v := range d.Violations {
			day := strings.Contains(strings.ToLower(v.QuotaID), "perday")
			if b.quotaID == "" || day && !b.perDay {
				b.quotaID = v.QuotaID
				b.metric = geminiMetric(v.QuotaMetric, v.QuotaID, day)
			}
			b.perDay = b.perDay || day
		}
		if d.RetryDelay != "" && !b.retry.Known {
			field := "body error.details[" + strconv.Itoa(i) + "].retryDelay"
			if dur, reason := parseDuration(d.RetryDelay); reason == "" {
				b.retry = RetryDelay{Delay: dur, Known: true, Source: "body"}
			} else {
				b.problems = append(b.problems, &ValueError{Field: field, Value: d.RetryDelay, Reason: reason})
			}
		}
	}
	return nil
}

// geminiMetric maps a Gemini quota violation to a metric: Gemini's token
// quotas count input tokens per minute, or tokens per day.
func geminiMetric(quotaMetric, quotaID string, day bool) Metric {
	tokens := strings.Contains(strings.ToLower(quotaMetric+" "+quotaID), "token")
	switch {
	case tokens && day:
		return TokensPerDay
	case tokens:
		return InputTokens
	case day:
		return RequestsPerDay
	}
	return Requests
}

// metricFromType maps OpenAI's error type ("tokens", "requests") to a metric.
func metricFromType(t string) Metric {
	switch strings.ToLower(t) {
	case "tokens", "tokens_usage_based":
		return Tokens
	case "requests":
		return Requests
	case "input_tokens":
		return InputTokens
	case "output_tokens":
		return OutputTokens
	}
	return ""
}

// textMetrics maps phrases in a message (lower case) to metrics, most
// specific first.
var textMetrics = []struct {
	phrase string
	metric Metric
}{
	{"(itpm)", InputTokens}, {"(otpm)", OutputTokens},
	{"(tpm)", Tokens}, {"(rpm)", Requests}, {"(rpd)", RequestsPerDay}, {"(tpd)", TokensPerDay},
	{"input tokens per min", InputTokens}, {"output tokens per min", OutputTokens},
	{"number of request tokens", InputTokens},
	{"free-models-per-day", RequestsPerDay}, {"free-models-per-min", Requests},
	{"tokens per day", TokensPerDay}, {"requests per day", RequestsPerDay},
	{"tokens per min", Tokens}, {"requests per min", Requests},
	{"token rate limit", Tokens}, {"call rate limit", Requests},
}

var (
	limitRequested = regexp.MustCompile(`(?i)\blimit:? ([0-9][0-9,]*),(?: used:? [0-9][0-9,]*,)? requested:? ([0-9][0-9,]*)`)
	tryAgainIn     = regexp.MustCompile(`(?i)try again in ((?:[0-9]+(?:\.[0-9]+)?(?:ns|us|µs|ms|s|m|h))+)`)
	retryAfterSecs = regexp.MustCompile(`(?i)retry after ([0-9]+(?:\.[0-9]+)?) seconds?\b`)
)

// readMessage reads the metric (unless a Gemini violation named it), the limit and requested numbers, and a retry
// delay from the message text.
func (b *parsedBody) readMessage() {
	msg := b.message
	if len(msg) > 4096 {
		msg = msg[:4096]
	}
	lower := strings.ToLower(msg)
	for _, tm := range textMetrics {
		if b.quotaID != "" {
			break // a Gemini violation names the metric exactly
		}
		if strings.Contains(lower, tm.phrase) {
			b.metric = tm.metric
			break
		}
	}
	if m := limitRequested.FindStringSubmatch(msg); m != nil {
		b.limit = messageCount(m[1])
		b.requested = messageCount(m[2])
	}
	if b.retry.Known {
		return
	}
	if m := tryAgainIn.FindStringSubmatch(msg); m != nil {
		b.retryFromText(parseDuration(m[1]))
	} else if m := retryAfterSecs.FindStringSubmatch(msg); m != nil {
		b.retryFromText(secondsDuration(m[1]))
	}
}

func (b *parsedBody) retryFromText(d time.Duration, reason string) {
	if reason != "" {
		b.problems = append(b.problems, &ValueError{Field: "body message", Value: b.message, Reason: "retry delay " + reason})
		return
	}
	b.retry = RetryDelay{Delay: d, Known: true, Source: "body"}
}

// messageCount reads "30,000" or "30000" from a message.
func messageCount(s string) Count {
	n, err := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
	if err != nil || n < 0 {
		return Count{}
	}
	return Count{Value: n, Known: true, Header: "body"}
}

// decodeObject decodes raw into a T when raw is a JSON object.
func decodeObject[T any](raw json.RawMessage) (T, bool) {
	var v T
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return v, false
	}
	_ = json.Unmarshal(raw, &v)
	return v, true
}

// jsonString returns raw as a string when it is a JSON string, or its text
// when it is a number; "" otherwise.
func jsonString(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	}
	if raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9' {
		return string(raw)
	}
	return ""
}
