package envoyrls

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
)

// okFor answers OK for n descriptors, none of them limited.
func okFor(n int) *rlsv3.RateLimitResponse {
	out := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, n)}
	for i := range out.Statuses {
		out.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
	}
	return out
}

// response builds the answer to a first call: a status per descriptor, and
// the RateLimit and RateLimit-Policy header fields
// (draft-ietf-httpapi-ratelimit-headers) for the response, with
// Retry-After when the request is over the limit.
func (s *Server) response(ctx context.Context, c *call, res sluice.Result) *rlsv3.RateLimitResponse {
	out := okFor(len(c.of))
	if !res.Granted() {
		out.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	dims := make([]string, len(c.items))
	for k, it := range c.items {
		dims[k] = it.dim
	}
	specs := s.specs.get(ctx, dims, s.now())
	var policy, state []string
	for k, it := range c.items {
		if k >= len(res.Dimensions) {
			break
		}
		r := res.Dimensions[k]
		spec, known := specs[it.dim]
		reset := r.RetryIn
		if reset == 0 && known {
			reset = toFull(spec, r.Remaining)
		}
		for i, at := range c.of {
			if at != k {
				continue
			}
			st := out.Statuses[i]
			st.LimitRemaining = clampUint32(int64(r.Remaining) / 1000)
			st.DurationUntilReset = durationpb.New(reset)
			if !res.Granted() && r.RetryIn > 0 {
				st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
			}
			if known {
				st.CurrentLimit = currentLimit(it.dim, spec)
			}
		}
		name := sfString(it.dim)
		if known {
			policy = append(policy, fmt.Sprintf("%s;q=%d;w=%d", name, spec.Capacity, windowSeconds(spec)))
		}
		state = append(state, fmt.Sprintf("%s;r=%d;t=%d", name, max(int64(r.Remaining)/1000, 0), ceilSeconds(reset)))
	}
	if len(policy) > 0 {
		out.ResponseHeadersToAdd = append(out.ResponseHeadersToAdd, &corev3.HeaderValue{Key: "RateLimit-Policy", Value: strings.Join(policy, ", ")})
	}
	if len(state) > 0 {
		out.ResponseHeadersToAdd = append(out.ResponseHeadersToAdd, &corev3.HeaderValue{Key: "RateLimit", Value: strings.Join(state, ", ")})
	}
	if !res.Granted() {
		out.ResponseHeadersToAdd = append(out.ResponseHeadersToAdd, &corev3.HeaderValue{Key: "Retry-After", Value: strconv.FormatInt(ceilSeconds(res.RetryIn), 10)})
	}
	return out
}

// sfString writes s as a structured-field string (RFC 8941).
func sfString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r > 0x7e:
			b.WriteByte('?') // not representable in an sf-string
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// windowSeconds is the time a bucket takes to refill from empty, the
// policy's window; a concurrent bucket has none (0).
func windowSeconds(c bucket.Config) int64 {
	if c.RefillAmount <= 0 {
		return 0
	}
	return ceilSeconds(time.Duration(float64(c.RefillPeriod) * float64(c.Capacity) / float64(c.RefillAmount)))
}

// toFull is the time until a bucket holding remaining (millitokens) is
// full again.
func toFull(c bucket.Config, remaining sluice.Millitokens) time.Duration {
	if c.RefillAmount <= 0 {
		return 0
	}
	missing := float64(c.Capacity*1000-int64(remaining)) / 1000
	if missing <= 0 {
		return 0
	}
	return time.Duration(missing / float64(c.RefillAmount) * float64(c.RefillPeriod))
}

// units are Envoy's rate limit units, shortest first.
var units = []struct {
	d time.Duration
	u rlsv3.RateLimitResponse_RateLimit_Unit
}{
	{time.Second, rlsv3.RateLimitResponse_RateLimit_SECOND},
	{time.Minute, rlsv3.RateLimitResponse_RateLimit_MINUTE},
	{time.Hour, rlsv3.RateLimitResponse_RateLimit_HOUR},
	{24 * time.Hour, rlsv3.RateLimitResponse_RateLimit_DAY},
}

// currentLimit describes a bucket in Envoy's terms: its refill rate,
// rounded down, in the longest unit no longer than its period (a second
// for a shorter one), or a longer unit when that rounds to nothing. A
// concurrent bucket is its slots, unit UNKNOWN.
func currentLimit(dim string, c bucket.Config) *rlsv3.RateLimitResponse_RateLimit {
	l := &rlsv3.RateLimitResponse_RateLimit{Name: dim, RequestsPerUnit: clampUint32(c.Capacity)}
	if c.RefillAmount <= 0 || c.RefillPeriod <= 0 {
		return l
	}
	k := 0
	for k+1 < len(units) && units[k+1].d <= c.RefillPeriod {
		k++
	}
	for ; k < len(units); k++ {
		n := int64(float64(c.RefillAmount) * float64(units[k].d) / float64(c.RefillPeriod))
		if n >= 1 || k == len(units)-1 {
			l.Unit, l.RequestsPerUnit = units[k].u, clampUint32(n)
			return l
		}
	}
	return l
}

// specTTL is how long a bucket's configuration is trusted.
const specTTL = 30 * time.Second

// specCache keeps the configurations of the buckets it was asked for, so
// that answers describe their limits without a store call each.
type specCache struct {
	c  *sluice.Client
	mu sync.Mutex
	by map[string]spec
}

type spec struct {
	cfg bucket.Config
	at  time.Time
}

func newSpecCache(c *sluice.Client) *specCache {
	return &specCache{c: c, by: map[string]spec{}}
}

// get returns the configurations of dims, reading the missing or stale
// ones in one Peek; a failed read leaves them out.
func (sc *specCache) get(ctx context.Context, dims []string, now time.Time) map[string]bucket.Config {
	out := make(map[string]bucket.Config, len(dims))
	var miss []string
	sc.mu.Lock()
	for _, d := range dims {
		if sp, ok := sc.by[d]; ok && now.Sub(sp.at) < specTTL {
			out[d] = sp.cfg
		} else {
			miss = append(miss, d)
		}
	}
	sc.mu.Unlock()
	if len(miss) == 0 {
		return out
	}
	states, err := sc.c.Peek(ctx, miss...)
	if err != nil {
		return out
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, st := range states {
		sc.by[st.Name] = spec{st.Config, now}
		out[st.Name] = st.Config
	}
	return out
}
