// Package reconcile recovers what crashed callers leaked: it returns the
// cost of expired concurrent leases to their buckets (with the capacity
// guard: a restore never lifts a bucket above its capacity), deletes
// expired lease records of every type, and deletes records whose bucket is
// gone.
//
// A Reconciler works through a *sluice.Client (Client.Reconcile), so its
// requests are validated and its contention retried like every other
// caller's. New builds that Client over a store; NewForClient uses one the
// caller already has.
//
// A Reconciler runs once (RunOnce, for a cron job or the DynamoDB Lambda) or
// every interval until its context is cancelled (Run, for a sidecar or the
// service). Every pass is idempotent and logs the reconciler.complete
// event with restored, dimensions and already_capped.
package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store"
)

// Defaults for a pass.
const (
	// DefaultBatchSize is how many expired leases one store call processes.
	DefaultBatchSize = store.DefaultReconcileLimit
	// DefaultMaxBatches bounds one pass, so that a huge backlog is worked
	// off over several passes instead of one unbounded one.
	DefaultMaxBatches = 100
	// DefaultInterval is the usual schedule: every 5 minutes.
	DefaultInterval = 5 * time.Minute
)

// Report is the outcome of one pass; the first three fields are those
// reconciler.complete has always logged.
type Report struct {
	// Restored counts expired leases processed (cost returned or record
	// cleaned up).
	Restored int `json:"restored"`
	// Dimensions lists, sorted, the dimensions that had expired leases.
	Dimensions []string `json:"dimensions"`
	// AlreadyCapped counts concurrent leases whose restore the capacity
	// guard limited: usually a lease both released and expired, or a bucket
	// reset while leases were out.
	AlreadyCapped int `json:"already_capped"`
	// Reclaimed counts concurrent leases whose cost went back to a bucket.
	Reclaimed int `json:"reclaimed"`
	// Orphans counts records deleted because their bucket is gone.
	Orphans int `json:"orphans"`
	// Batches counts store calls made.
	Batches int `json:"batches"`
	// Truncated reports that the pass stopped at MaxBatches with expired
	// leases left for the next pass.
	Truncated bool `json:"truncated"`
}

// Reconciler runs reconcile passes against a store. It is safe for
// concurrent use, and several reconcilers (in several processes) may run
// against one store: each lease is processed exactly once.
type Reconciler struct {
	c          *sluice.Client
	clock      sluice.Clock
	clockSet   bool
	log        *slog.Logger
	batch      int
	maxBatches int
	onReport   func(Report)
}

// Option configures a Reconciler.
type Option func(*Reconciler)

// WithClock sets the clock leases are judged expired against (default: the
// wall clock). It applies to New only: a Reconciler from NewForClient
// uses its Client's clock.
func WithClock(c sluice.Clock) Option {
	return func(r *Reconciler) { r.clock, r.clockSet = c, true }
}

// WithLogger sets the logger for reconciler.complete (default: discard).
func WithLogger(l *slog.Logger) Option { return func(r *Reconciler) { r.log = l } }

// WithBatchSize sets how many leases one store call processes.
func WithBatchSize(n int) Option { return func(r *Reconciler) { r.batch = n } }

// WithMaxBatches bounds the store calls of one pass.
func WithMaxBatches(n int) Option { return func(r *Reconciler) { r.maxBatches = n } }

// WithReportFunc calls f after every successful pass, e.g. to export metrics.
func WithReportFunc(f func(Report)) Option { return func(r *Reconciler) { r.onReport = f } }

// New returns a Reconciler over st. Its Client has no OpTimeout: a batch
// is bounded by the store's own timeouts, as a large batch may take longer
// than an acquisition's bound.
func New(st store.Store, opts ...Option) (*Reconciler, error) {
	r, err := newReconciler(opts)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, &sluice.FieldError{Field: "store", Value: nil, Reason: "must not be nil"}
	}
	cfg := sluice.DefaultConfig()
	cfg.OpTimeout = 0
	r.c, err = sluice.New(st, sluice.WithConfig(cfg), sluice.WithClock(r.clock))
	if err != nil {
		return nil, err
	}
	return r, nil
}

// NewForClient returns a Reconciler that runs its batches through c, with
// c's clock, bound (Config.OpTimeout) and Observer.
func NewForClient(c *sluice.Client, opts ...Option) (*Reconciler, error) {
	r, err := newReconciler(opts)
	if err != nil {
		return nil, err
	}
	switch {
	case c == nil:
		return nil, &sluice.FieldError{Field: "client", Value: nil, Reason: "must not be nil"}
	case r.clockSet:
		return nil, &sluice.FieldError{Field: "clock", Value: r.clock, Reason: "set the clock on the Client (sluice.WithClock), not the Reconciler"}
	}
	r.c = c
	return r, nil
}

// newReconciler applies opts to the defaults and checks them.
func newReconciler(opts []Option) (*Reconciler, error) {
	r := &Reconciler{clock: sluice.SystemClock{}, batch: DefaultBatchSize, maxBatches: DefaultMaxBatches}
	for _, o := range opts {
		o(r)
	}
	switch {
	case r.clock == nil:
		return nil, &sluice.FieldError{Field: "clock", Value: nil, Reason: "must not be nil"}
	case r.batch < 1 || r.batch > 100_000:
		return nil, &sluice.FieldError{Field: "batch_size", Value: r.batch, Reason: "must be between 1 and 100000"}
	case r.maxBatches < 1:
		return nil, &sluice.FieldError{Field: "max_batches", Value: r.maxBatches, Reason: "must be at least 1"}
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r, nil
}

// RunOnce runs one pass: batches of expired leases until none is left or
// MaxBatches is reached. It logs reconciler.complete and returns the report;
// on a store error it returns what was done so far and the error.
func (r *Reconciler) RunOnce(ctx context.Context) (Report, error) {
	var rep Report
	dims := map[string]bool{}
	for {
		res, err := r.c.Reconcile(ctx, sluice.ReconcileOptions{Limit: r.batch})
		if err != nil {
			rep.Dimensions = sortedKeys(dims)
			return rep, fmt.Errorf("reconcile: batch %d: %w", rep.Batches+1, err)
		}
		rep.Batches++
		rep.Restored += res.Processed
		rep.AlreadyCapped += res.AlreadyCapped
		rep.Reclaimed += res.Reclaimed
		rep.Orphans += res.Orphans
		for _, d := range res.Dimensions {
			dims[d] = true
		}
		if !res.More {
			break
		}
		if rep.Batches >= r.maxBatches {
			rep.Truncated = true
			break
		}
	}
	rep.Dimensions = sortedKeys(dims)
	r.log.LogAttrs(ctx, slog.LevelInfo, "reconciler.complete",
		slog.Int("restored", rep.Restored),
		slog.Any("dimensions", rep.Dimensions),
		slog.Int("already_capped", rep.AlreadyCapped),
		slog.Int("reclaimed", rep.Reclaimed),
		slog.Int("orphans", rep.Orphans),
		slog.Bool("truncated", rep.Truncated))
	if r.onReport != nil {
		r.onReport(rep)
	}
	return rep, nil
}

// Run runs a pass now and then every interval until ctx is cancelled, when
// it returns nil. A failed pass is logged (reconciler.error) and retried at
// the next interval: a store outage must not stop the loop.
func (r *Reconciler) Run(ctx context.Context, every time.Duration) error {
	if every <= 0 {
		return &sluice.FieldError{Field: "interval", Value: every, Reason: "must be positive"}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
			r.log.LogAttrs(ctx, slog.LevelError, "reconciler.error", slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
