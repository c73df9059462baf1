package envoyrls

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// okFor answers OK for n descriptors, none of them limited.
func okFor(n int) *rlsv3.RateLimitResponse {
	out := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, n)}
	sts := make([]rlsv3.RateLimitResponse_DescriptorStatus, n)
	for i := range out.Statuses {
		sts[i].Code = rlsv3.RateLimitResponse_OK
		out.Statuses[i] = &sts[i]
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
	var specs [store.MaxItems]*spec
	s.specs.get(ctx, c.items, s.now(), specs[:len(c.items)])
	var pbuf, sbuf [128]byte
	policy, state := pbuf[:0], sbuf[:0]
	for k, it := range c.items {
		if k >= len(res.Dimensions) {
			break
		}
		r := res.Dimensions[k]
		sp := specs[k]
		reset := r.RetryIn
		if reset == 0 && sp != nil {
			reset = toFull(sp.cfg, r.Remaining)
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
			if sp != nil {
				st.CurrentLimit = sp.limit
			}
		}
		var name string
		if sp != nil {
			name = sp.name
			policy = appendItem(policy, sp.policy)
		} else {
			name = sfString(it.dim)
		}
		state = appendItem(state, name)
		state = append(state, ";r="...)
		state = strconv.AppendInt(state, max(int64(r.Remaining)/1000, 0), 10)
		state = append(state, ";t="...)
		state = strconv.AppendInt(state, ceilSeconds(reset), 10)
	}
	hv := make([]corev3.HeaderValue, 3)
	out.ResponseHeadersToAdd = make([]*corev3.HeaderValue, 0, len(hv))
	add := func(key, value string) {
		h := &hv[len(out.ResponseHeadersToAdd)]
		h.Key, h.Value = key, value
		out.ResponseHeadersToAdd = append(out.ResponseHeadersToAdd, h)
	}
	if len(policy) > 0 {
		add("RateLimit-Policy", string(policy))
	}
	if len(state) > 0 {
		add("RateLimit", string(state))
	}
	if !res.Granted() {
		add("Retry-After", strconv.FormatInt(ceilSeconds(res.RetryIn), 10))
	}
	return out
}

// appendItem appends a list member of a structured field to list.
func appendItem(list []byte, member string) []byte {
	if len(list) > 0 {
		list = append(list, ", "...)
	}
	return append(list, member...)
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
	by map[string]*spec
}

// spec is a bucket's configuration as answers describe it. It is never
// modified once cached: answers share it.
type spec struct {
	cfg bucket.Config
	at  time.Time
	// name is the dimension as a structured-field string, policy its
	// RateLimit-Policy member and limit its current_limit.
	name, policy string
	limit        *rlsv3.RateLimitResponse_RateLimit
}

func newSpec(dim string, cfg bucket.Config, at time.Time) *spec {
	name := sfString(dim)
	return &spec{
		cfg: cfg, at: at, name: name,
		policy: name + ";q=" + strconv.FormatInt(cfg.Capacity, 10) + ";w=" + strconv.FormatInt(windowSeconds(cfg), 10),
		limit:  currentLimit(dim, cfg),
	}
}

func newSpecCache(c *sluice.Client) *specCache {
	return &specCache{c: c, by: map[string]*spec{}}
}

// get fills out with the configurations of items' dimensions, reading the
// missing or stale ones in one Peek; one whose read failed is nil.
func (sc *specCache) get(ctx context.Context, items []item, now time.Time, out []*spec) {
	var miss []string
	sc.mu.Lock()
	for k, it := range items {
		if sp := sc.by[it.dim]; sp != nil && now.Sub(sp.at) < specTTL {
			out[k] = sp
		} else {
			miss = append(miss, it.dim)
		}
	}
	sc.mu.Unlock()
	if len(miss) == 0 {
		return
	}
	states, err := sc.c.Peek(ctx, miss...)
	if err != nil {
		return
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, st := range states {
		sp := newSpec(st.Name, st.Config, now)
		sc.by[st.Name] = sp
		for k, it := range items {
			if it.dim == st.Name {
				out[k] = sp
			}
		}
	}
}
