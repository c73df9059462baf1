package vendorsim

import (
	"fmt"
	"net/http"
	"time"
)

type anErrorBody struct {
	Type  string  `json:"type"`
	Error anError `json:"error"`
}

type anError struct {
	Type    string         `json:"type"`
	Message string         `json:"message"`
	Details *anErrorDetail `json:"details,omitempty"`
}

type anErrorDetail struct {
	ErrorCode string `json:"error_code"`
}

// writeError writes an error in the vendor's format.
func (s *Sim) writeError(w http.ResponseWriter, status int, typ, msg string) {
	s.writeErrorCode(w, status, typ, nil, msg)
}

func (s *Sim) writeErrorCode(w http.ResponseWriter, status int, typ string, code *string, msg string) {
	if s.cfg.Vendor == Anthropic {
		writeJSON(w, status, anErrorBody{Type: "error", Error: anError{Type: typ, Message: msg}})
		return
	}
	writeJSON(w, status, oaErrorBody{Error: oaError{Message: msg, Type: typ, Code: code}})
}

// writeOverloaded writes the vendor's overloaded error: OpenAI 503,
// Anthropic 529.
func (s *Sim) writeOverloaded(w http.ResponseWriter, status int) {
	if s.cfg.Vendor == Anthropic {
		s.writeError(w, status, "overloaded_error", "Overloaded")
		return
	}
	s.writeError(w, status, "server_error", "The engine is currently overloaded, please try again later.")
}

// writeQuota writes the vendor's quota-exhausted 429, without retry-after.
func (s *Sim) writeQuota(w http.ResponseWriter, now time.Time) {
	if s.cfg.Vendor == Anthropic {
		u := now.UTC()
		next := time.Date(u.Year(), u.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		writeJSON(w, http.StatusTooManyRequests, anErrorBody{Type: "error", Error: anError{Type: "rate_limit_error",
			Message: fmt.Sprintf("You have reached your specified API usage limits. You will regain access on %s at 00:00 UTC.",
				next.Format(time.DateOnly)),
			Details: &anErrorDetail{ErrorCode: "enforced_spend_limit_reached"}}})
		return
	}
	s.writeErrorCode(w, http.StatusTooManyRequests, "insufficient_quota", strp("insufficient_quota"),
		"You exceeded your current quota, please check your plan and billing details. For more information on this error, "+
			"read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.")
}

// openAIMetricName names a metric in OpenAI's 429 messages, with the error
// type.
func openAIMetricName(m Metric) (name, typ string) {
	switch m {
	case MetricRequests:
		return "requests per min (RPM)", "requests"
	case MetricRequestsPerDay:
		return "requests per day (RPD)", "requests"
	case MetricTokensPerDay:
		return "tokens per day (TPD)", "tokens"
	}
	return "tokens per min (TPM)", "tokens"
}

// anthropicMetricName names a metric in Anthropic's 429 messages.
func anthropicMetricName(m Metric) string {
	switch m {
	case MetricInputTokens:
		return "input tokens"
	case MetricOutputTokens:
		return "output tokens"
	}
	return "requests"
}

// writeRateLimited writes the vendor's 429 for a denial, with retry-after
// unless the request can never be admitted.
func (s *Sim) writeRateLimited(w http.ResponseWriter, c *call, d *denial) {
	h := w.Header()
	switch {
	case d.tooLarge:
	case s.cfg.Rules.AbsurdRetryAfter:
		setRetryAfter(h, AbsurdRetryAfter*time.Second, s.cfg.Vendor != Anthropic)
	default:
		setRetryAfter(h, d.wait, s.cfg.Vendor != Anthropic)
	}
	org := s.cfg.Organization
	switch s.cfg.Vendor {
	case Anthropic:
		msg := fmt.Sprintf("This request would exceed your organization's (%s) rate limit of %d %s per minute (model: %s). "+
			"For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. "+
			"Please reduce the prompt length or the maximum tokens requested, or try again later.",
			org, d.limit, anthropicMetricName(d.metric), c.model)
		s.writeError(w, http.StatusTooManyRequests, "rate_limit_error", msg)
	case Azure:
		kind := "token"
		if d.metric == MetricRequests {
			kind = "call"
		}
		msg := fmt.Sprintf("Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded %s rate limit of your current OpenAI S0 pricing tier.", kind)
		if !d.tooLarge {
			msg += fmt.Sprintf(" Please retry after %d seconds.", max(ceilSeconds(d.wait), 1))
		}
		msg += " Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the default rate limit."
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]string{"code": "429", "message": msg}})
	default:
		name, typ := openAIMetricName(d.metric)
		var msg string
		if d.tooLarge {
			msg = fmt.Sprintf("Request too large for %s in organization %s on %s: Limit %d, Requested %d. "+
				"The input or output tokens must be reduced in order to run successfully. "+
				"Visit https://platform.openai.com/account/rate-limits to learn more.", c.model, org, name, d.limit, d.requested)
		} else {
			msg = fmt.Sprintf("Rate limit reached for %s in organization %s on %s: Limit %d, Used %d, Requested %d. "+
				"Please try again in %s. Visit https://platform.openai.com/account/rate-limits to learn more.",
				c.model, org, name, d.limit, d.used, d.requested, goDuration(d.wait))
		}
		s.writeErrorCode(w, http.StatusTooManyRequests, typ, strp("rate_limit_exceeded"), msg)
	}
}
