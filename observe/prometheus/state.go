package prometheus

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ontopix/sluice"
	prom "github.com/prometheus/client_golang/prometheus"
)

// expiredLeaseLimit bounds the expired lease records one refresh lists.
const expiredLeaseLimit = 1000

// StateCollector exports the state of a Client's buckets as gauges, read
// through the Client when Prometheus scrapes: balance, capacity, fill,
// debt, the line of reservations in time, cooldown, and lease records.
// Register it on a registry of your own or prometheus.DefaultRegisterer
// (Register, MustRegister).
//
// A scrape reads the store at most once per WithStateCacheFor period
// (5 s by default), whatever the number of scrapers: scrapes that come
// while a read is under way wait for it and share it, and scrapes within
// the period answer from it. One read is one Client.Buckets call (or
// Client.Peek with WithStateDimensions) and one Client.Leases call for
// the expired records, both within WithStateTimeout (2 s by default). A
// failed read sets sluice_state_up to 0 and leaves the bucket gauges out
// until a read succeeds; the failure is cached like a success, so a
// store that is down is not asked more often.
//
// A StateCollector is safe for concurrent use. It does not report to, or
// need, the Observer that New returns; use both.
type StateCollector struct {
	client   *sluice.Client
	timeout  time.Duration
	cacheFor time.Duration
	dims     []string
	maxDims  int

	tokens, capacity, fill, debt, queue, waiters, cooldown, leases, expired *prom.Desc
	buckets, up, reads                                                      *prom.Desc

	mu     sync.Mutex
	read   time.Time // when the cached read was made; zero before the first
	cached []prom.Metric
	ok     float64 // reads that succeeded
	failed float64 // reads that failed
}

// NewStateCollector returns a collector of client's bucket state. The
// options that apply are WithMaxDimensions (at most that many buckets are
// exported, the first by name; sluice_state_buckets counts them all),
// WithConstLabels, WithStateTimeout, WithStateCacheFor and
// WithStateDimensions. It fails with an error matching sluice.ErrInvalid
// when client is nil or an option is invalid.
func NewStateCollector(client *sluice.Client, opts ...Option) (*StateCollector, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if client == nil {
		return nil, fmt.Errorf("prometheus: %w", &sluice.FieldError{Field: "client", Value: "nil", Reason: "must be set"})
	}
	d := func(name, help string, labels ...string) *prom.Desc {
		return prom.NewDesc(name, help, labels, c.constLabels)
	}
	return &StateCollector{
		client: client, timeout: c.stateTimeout, cacheFor: c.stateCache, dims: c.stateDims, maxDims: c.maxDims,
		tokens:   d("sluice_bucket_tokens", "Balance of the bucket when read, in its units; negative while reservations wait in line or settlements left debt.", "dimension"),
		capacity: d("sluice_bucket_capacity_tokens", "Capacity of the bucket, in its units, with its limit type (requests, tokens, concurrent).", "dimension", "type"),
		fill:     d("sluice_bucket_fill_ratio", "Balance over capacity, from 0 (empty, or owing) to 1 (full).", "dimension"),
		debt:     d("sluice_bucket_debt_tokens", "What the bucket owes below zero, in its units: reservations waiting in line and settlements above their estimates; 0 when the balance is 0 or more.", "dimension"),
		queue:    d("sluice_bucket_queue_seconds", "Time until the balance is back to zero and any cooldown is over, at the refill rate: the line a new reservation joins (requests and tokens buckets only).", "dimension"),
		waiters:  d("sluice_bucket_waiters", "Callers waiting in line for the bucket's slots (concurrent buckets only; 0 on a store without a waiter line).", "dimension"),
		cooldown: d("sluice_bucket_cooldown_seconds", "Time left in the bucket's cooldown; 0 when none runs.", "dimension"),
		leases:   d("sluice_bucket_leases", "Lease records of the bucket (held or expired and not yet reconciled).", "dimension"),
		expired:  d("sluice_bucket_expired_leases", "Lease records of the bucket past their expiry and not yet reconciled (at most 1000 are counted over all buckets).", "dimension"),
		buckets:  d("sluice_state_buckets", "Buckets the latest successful read found, exported or not."),
		up:       d("sluice_state_up", "1 when the latest read of the buckets succeeded, 0 when it failed."),
		reads:    d("sluice_state_reads_total", "Reads of the buckets the collector made, by result (ok, error).", "result"),
	}, nil
}

// Describe implements prometheus.Collector.
func (s *StateCollector) Describe(ch chan<- *prom.Desc) {
	for _, d := range []*prom.Desc{s.tokens, s.capacity, s.fill, s.debt, s.queue, s.waiters, s.cooldown, s.leases, s.expired, s.buckets, s.up, s.reads} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: it reads the buckets unless
// the last read is recent enough, and sends the gauges.
func (s *StateCollector) Collect(ch chan<- prom.Metric) {
	s.mu.Lock()
	now := time.Now()
	if s.read.IsZero() || now.Sub(s.read) >= s.cacheFor || now.Before(s.read) {
		s.cached = s.refresh()
		s.read = time.Now()
	}
	ms := s.cached
	ok, failed := s.ok, s.failed
	s.mu.Unlock()
	for _, m := range ms {
		ch <- m
	}
	ch <- prom.MustNewConstMetric(s.reads, prom.CounterValue, ok, "ok")
	ch <- prom.MustNewConstMetric(s.reads, prom.CounterValue, failed, "error")
}

// refresh reads the buckets and the expired lease records and returns the
// gauges; s.mu is held.
func (s *StateCollector) refresh() []prom.Metric {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	states, expired, err := s.readState(ctx)
	if err != nil {
		s.failed++
		return []prom.Metric{prom.MustNewConstMetric(s.up, prom.GaugeValue, 0)}
	}
	s.ok++
	ms := make([]prom.Metric, 0, 2+8*min(len(states), s.maxDims))
	ms = append(ms, prom.MustNewConstMetric(s.up, prom.GaugeValue, 1),
		prom.MustNewConstMetric(s.buckets, prom.GaugeValue, float64(len(states))))
	for i, st := range states {
		if i == s.maxDims {
			break
		}
		ms = append(ms, s.bucketMetrics(st, expired[st.Name])...)
	}
	return ms
}

// readState reads the buckets and counts the expired lease records per
// dimension.
func (s *StateCollector) readState(ctx context.Context) ([]sluice.BucketState, map[string]int, error) {
	var states []sluice.BucketState
	var err error
	if len(s.dims) > 0 {
		states, err = s.client.Peek(ctx, s.dims...)
	} else {
		states, err = s.client.Buckets(ctx)
	}
	if err != nil {
		return nil, nil, err
	}
	recs, err := s.client.Leases(ctx, sluice.LeaseQuery{ExpiredOnly: true, Limit: expiredLeaseLimit})
	if err != nil {
		return nil, nil, err
	}
	expired := map[string]int{}
	for _, r := range recs {
		for _, d := range r.Dimensions {
			expired[d.Dimension]++
		}
	}
	return states, expired, nil
}

// bucketMetrics returns the gauges of one bucket.
func (s *StateCollector) bucketMetrics(st sluice.BucketState, expired int) []prom.Metric {
	bal := st.Tokens.Tokens()
	capacity := float64(st.Config.Capacity)
	fill := 0.0
	if capacity > 0 {
		fill = min(max(bal/capacity, 0), 1)
	}
	cooldown := 0.0
	if st.CoolingDown() {
		cooldown = st.CooldownUntil.Sub(st.Now).Seconds()
	}
	g := func(d *prom.Desc, v float64, labels ...string) prom.Metric {
		return prom.MustNewConstMetric(d, prom.GaugeValue, v, append([]string{st.Name}, labels...)...)
	}
	ms := []prom.Metric{
		g(s.tokens, bal),
		g(s.capacity, capacity, st.Config.Type.String()),
		g(s.fill, fill),
		g(s.debt, max(-bal, 0)),
		g(s.cooldown, cooldown),
		g(s.leases, float64(st.ActiveLeases)),
		g(s.expired, float64(expired)),
	}
	if st.Config.Type != sluice.Concurrent {
		ms = append(ms, g(s.queue, sluice.TimeUntil(st, 0).Seconds()))
	} else {
		ms = append(ms, g(s.waiters, float64(st.Waiters)))
	}
	return ms
}
