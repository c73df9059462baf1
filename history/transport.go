package history

import (
	"context"
	"strconv"

	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
)

// TransportEvent records what a Transport saw of the vendor; pass it to
// transport.WithEvents. For every dimension the call was admitted on it
// counts the response by class (Counts.Responses) and lowers
// Counts.MinRemaining to what the response's rate-limit headers reported
// for the dimension's metric. A call sent unmetered (transport.Passed) has
// no dimension: it is counted in Counts.Unmetered, and its response, under
// the vendor's name (e.g. "openai") as the dimension. A call that never
// got its charges (transport.Denied) was not sent and counts nothing here
// (its acquisition does, through Observer). Events are recorded under the
// caller set by WithTransportCaller. The events carry no latency, so none
// is recorded. A bucket the response made the Transport reconfigure
// (vendors.Reaction.Resized) is kept as an EventLimit event.
func (r *Recorder) TransportEvent(ctx context.Context, e transport.Event) {
	if e.Outcome == transport.Denied {
		return
	}
	if e.Reaction != nil {
		for _, d := range e.Reaction.Resized {
			r.event(EventLimit, d, "bucket reconfigured to follow the vendor's limit (HTTP "+strconv.Itoa(e.Status)+")")
		}
	}
	class := responseClass(e)
	var sig vendors.Signals
	if e.Reaction != nil {
		sig = e.Reaction.Classification.Signals
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	now := r.second()
	if e.Outcome == transport.Passed {
		if e.Vendor == "" {
			return
		}
		for _, t := range r.tallies(r.lookup(string(e.Vendor), r.tcall), now) {
			if t != nil {
				t.n[cUnmetered]++
				t.n[cResp+class]++
			}
		}
		return
	}
	for i, c := range e.Admitted {
		if c.Dimension == "" || seen(e.Admitted[:i], c.Dimension) {
			continue
		}
		rem, known := sig.Metric(c.Metric).RemainingFloor()
		for _, t := range r.tallies(r.lookup(c.Dimension, r.tcall), now) {
			if t != nil {
				t.n[cResp+class]++
				if known {
					t.remaining(rem)
				}
			}
		}
	}
}

// seen reports whether a charge before this one named dim.
func seen(cs []vendors.Charge, dim string) bool {
	for _, c := range cs {
		if c.Dimension == dim {
			return true
		}
	}
	return false
}

// responseClass returns the index in classes of e's response.
func responseClass(e transport.Event) int {
	s := e.Status
	switch {
	case s == 0:
		return rError
	case s == 429:
		var m vendors.Metric
		if e.Reaction != nil {
			m = e.Reaction.Classification.Metric
		}
		switch m {
		case vendors.Requests, vendors.RequestsPerDay:
			return r429Req
		case vendors.Tokens, vendors.InputTokens, vendors.OutputTokens, vendors.TokensPerDay:
			return r429Tokens
		}
		return r429Other
	case s >= 200 && s < 300:
		return r2xx
	case s >= 400 && s < 500:
		return r4xx
	case s >= 500 && s < 600:
		return r5xx
	}
	return rOther
}
