package envoyrls

import (
	"fmt"
	"math"
	"sync"
	"time"

	"connectrpc.com/connect"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store"
)

// maxHits bounds one descriptor's hits, so that sums cannot overflow; a
// cost that large is above any bucket's capacity anyway.
const maxHits = 1 << 40

// call is a ShouldRateLimit request mapped to dimensions.
type call struct {
	// corr is the correlation entry's value; "" when there is none.
	corr string
	// items are the distinct dimensions with their summed hits (negative
	// for a refund).
	items []item
	// of maps each descriptor to its item, or -1 when no rule maps it.
	of []int
	// The arrays behind items and of for a small call.
	itemsBuf [4]item
	ofBuf    [4]int
}

type item struct {
	dim  string
	hits int64
}

// parse maps req's descriptors to dimensions by the rules.
func (s *Server) parse(req *rlsv3.RateLimitRequest) (*call, error) {
	c := new(call)
	c.items = c.itemsBuf[:0]
	if n := len(req.GetDescriptors()); n <= len(c.ofBuf) {
		c.of = c.ofBuf[:n]
	} else {
		c.of = make([]int, n)
	}
	var buf [8]entry
	for i, d := range req.GetDescriptors() {
		c.of[i] = -1
		entries := buf[:0]
		for _, e := range d.GetEntries() {
			if s.cfg.CorrelationKey != "" && e.GetKey() == s.cfg.CorrelationKey {
				if c.corr != "" && c.corr != e.GetValue() {
					return nil, invalid(fmt.Sprintf("descriptors[%d] carries %s %q where another carries %q: one call is one request", i, e.GetKey(), e.GetValue(), c.corr))
				}
				c.corr = e.GetValue()
				continue
			}
			entries = append(entries, entry{e.GetKey(), e.GetValue()})
		}
		dim, ok := s.match(entries)
		if !ok {
			continue
		}
		hits := int64(max(req.GetHitsAddend(), 1))
		if h := d.GetHitsAddend(); h != nil {
			hits = int64(min(h.GetValue(), maxHits))
		}
		if d.GetIsNegativeHits() {
			hits = -hits
		}
		k := c.index(dim)
		if k < 0 {
			if len(c.items) == store.MaxItems {
				return nil, invalid(fmt.Sprintf("the descriptors map to more than %d dimensions", store.MaxItems))
			}
			k = len(c.items)
			c.items = append(c.items, item{dim: dim})
		}
		c.items[k].hits += hits
		c.of[i] = k
	}
	return c, nil
}

// index returns the index of dim's item, or -1.
func (c *call) index(dim string) int {
	for k, it := range c.items {
		if it.dim == dim {
			return k
		}
	}
	return -1
}

// match returns the dimension of the first rule that matches entries.
func (s *Server) match(entries []entry) (string, bool) {
	for i := range s.rules {
		if dim, ok := s.rules[i].match(entries); ok {
			return dim, true
		}
	}
	return "", false
}

// dropRefunds removes the items whose hits are negative: a request's first
// call has no charge to refund. Their descriptors are answered OK.
func (c *call) dropRefunds() {
	keep := c.items[:0]
	moved := make([]int, len(c.items))
	for k, it := range c.items {
		moved[k] = -1
		if it.hits >= 0 {
			moved[k] = len(keep)
			keep = append(keep, it)
		}
	}
	c.items = keep
	for i, k := range c.of {
		if k >= 0 {
			c.of[i] = moved[k]
		}
	}
}

func invalid(msg string) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("envoyrls: %s", msg))
}

// held is the lease of a request whose stream has not ended.
type held struct {
	lease *sluice.Lease
	// placeholder is what the first call charged for a check (hits 0).
	placeholder map[string]int64
	// types are the dimensions' limit types.
	types map[string]string
}

// maxCorrelations bounds the requests whose end is awaited; beyond it a
// request's lease is released at once, as without a correlation key.
const maxCorrelations = 100_000

// correlations are the requests whose end-of-stream call is awaited, and
// those whose first call was denied (their end settles nothing). A request
// is kept for one more lease TTL (grace) after its lease expired, so that
// an end call coming that late is still known as one: it settles what the
// expired lease still takes and opens nothing of its own.
type correlations struct {
	mu     sync.Mutex
	byID   map[string]corrEntry
	grace  time.Duration
	lastGC time.Time
}

type corrEntry struct {
	h       *held // nil: the first call was denied
	expires time.Time
}

func newCorrelations(grace time.Duration) *correlations {
	return &correlations{byID: map[string]corrEntry{}, grace: grace}
}

// room reports whether another request can be awaited.
func (t *correlations) room() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID) < maxCorrelations
}

func (t *correlations) hold(id string, h *held, now, expires time.Time) {
	t.put(id, corrEntry{h, expires}, now)
}

func (t *correlations) deny(id string, now, expires time.Time) {
	t.put(id, corrEntry{nil, expires}, now)
}

func (t *correlations) put(id string, e corrEntry, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d := now.Sub(t.lastGC); d > time.Second || d < 0 {
		t.lastGC = now
		for k, v := range t.byID {
			if now.After(v.expires.Add(t.grace)) {
				delete(t.byID, k)
			}
		}
	}
	t.byID[id] = e
}

// end removes the request id and returns its lease (nil when its first
// call was denied), and whether it was awaited.
func (t *correlations) end(id string, now time.Time) (*held, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.byID[id]
	if !ok || now.After(e.expires.Add(t.grace)) {
		return nil, false
	}
	delete(t.byID, id)
	return e.h, true
}

// drain removes every awaited request and returns the leases.
func (t *correlations) drain() []*sluice.Lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*sluice.Lease
	for k, e := range t.byID {
		if e.h != nil {
			out = append(out, e.h.lease)
		}
		delete(t.byID, k)
	}
	return out
}

// clampUint32 converts n to uint32, saturating.
func clampUint32(n int64) uint32 {
	switch {
	case n < 0:
		return 0
	case n > math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(n)
}
