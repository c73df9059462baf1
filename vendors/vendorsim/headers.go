package vendorsim

import (
	"net/http"
	"strconv"
	"time"
)

// ceilDuration rounds d up to a multiple of unit.
func ceilDuration(d, unit time.Duration) time.Duration {
	if r := d % unit; r != 0 {
		d += unit - r
	}
	return d
}

// goDuration formats d as OpenAI's reset headers do: a Go duration rounded
// up to the millisecond ("6m0s", "1s", "20ms", "0s").
func goDuration(d time.Duration) string {
	return ceilDuration(d, time.Millisecond).String()
}

// ceilSeconds returns d in whole seconds, rounded up.
func ceilSeconds(d time.Duration) int64 {
	return int64(ceilDuration(d, time.Second) / time.Second)
}

// nearestThousand rounds n to the nearest thousand, halves up, as
// Anthropic's token "remaining" headers do.
func nearestThousand(n int64) int64 { return (n + 500) / 1000 * 1000 }

// setOpenAIHeaders writes the x-ratelimit-* headers for the requests and
// tokens limits (the daily limits have none). Azure gives resets in whole
// seconds, OpenAI as Go durations.
func setOpenAIHeaders(h http.Header, vs []view, azure bool) {
	for _, v := range vs {
		var name string
		switch v.metric {
		case MetricRequests:
			name = "requests"
		case MetricTokens:
			name = "tokens"
		default:
			continue
		}
		reset := goDuration(v.reset)
		if azure {
			reset = strconv.FormatInt(ceilSeconds(v.reset), 10)
		}
		h["X-Ratelimit-Limit-"+title(name)] = []string{strconv.FormatInt(v.limit, 10)}
		h["X-Ratelimit-Remaining-"+title(name)] = []string{strconv.FormatInt(v.remaining, 10)}
		h["X-Ratelimit-Reset-"+title(name)] = []string{reset}
	}
}

func title(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// rfc3339Ceil returns now+d rounded up to the second, in RFC 3339 UTC.
func rfc3339Ceil(now time.Time, d time.Duration) string {
	t := now.Add(d)
	if t2 := t.Truncate(time.Second); !t2.Equal(t) {
		t = t2.Add(time.Second)
	}
	return t.UTC().Format(time.RFC3339)
}

// setAnthropicHeaders writes the anthropic-ratelimit-* headers: requests,
// input-tokens, output-tokens, and tokens (input and output together: the
// limits summed, the remainders summed, the later reset). Token remainders
// are rounded to the nearest thousand.
func setAnthropicHeaders(h http.Header, vs []view, now time.Time) {
	var tok view
	var haveTok bool
	for _, v := range vs {
		var name string
		rem := v.remaining
		switch v.metric {
		case MetricRequests:
			name = "requests"
		case MetricInputTokens:
			name = "input-tokens"
		case MetricOutputTokens:
			name = "output-tokens"
		default:
			continue
		}
		if v.metric != MetricRequests {
			rem = nearestThousand(rem)
			tok.limit += v.limit
			tok.remaining += v.remaining
			tok.reset = max(tok.reset, v.reset)
			haveTok = true
		}
		p := "Anthropic-Ratelimit-" + canonical(name)
		h[p+"-Limit"] = []string{strconv.FormatInt(v.limit, 10)}
		h[p+"-Remaining"] = []string{strconv.FormatInt(rem, 10)}
		h[p+"-Reset"] = []string{rfc3339Ceil(now, v.reset)}
	}
	if haveTok {
		h["Anthropic-Ratelimit-Tokens-Limit"] = []string{strconv.FormatInt(tok.limit, 10)}
		h["Anthropic-Ratelimit-Tokens-Remaining"] = []string{strconv.FormatInt(nearestThousand(tok.remaining), 10)}
		h["Anthropic-Ratelimit-Tokens-Reset"] = []string{rfc3339Ceil(now, tok.reset)}
	}
}

// canonical returns "input-tokens" as "Input-Tokens".
func canonical(s string) string { return http.CanonicalHeaderKey(s) }

// setRetryAfter writes retry-after (whole seconds, rounded up) and, for
// OpenAI and Azure, retry-after-ms.
func setRetryAfter(h http.Header, wait time.Duration, withMS bool) {
	h.Set("Retry-After", strconv.FormatInt(max(ceilSeconds(wait), 1), 10))
	if withMS {
		h.Set("Retry-After-Ms", strconv.FormatInt(max(int64(ceilDuration(wait, time.Millisecond)/time.Millisecond), 1), 10))
	}
}
