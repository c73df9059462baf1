package history

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ontopix/sluice/store"
)

// finalFlushTimeout bounds the flush Run and Close make at the end.
const finalFlushTimeout = 10 * time.Second

// Run flushes every flush interval (WithFlushEvery, 10 s by default) until
// ctx ends, then flushes once more, within 10 s, and returns that last
// flush's error. A failed flush keeps its rows for the next one. When the
// Recorder writes nothing, Run waits for ctx to end and returns nil.
func (r *Recorder) Run(ctx context.Context) error {
	if r.usage() == nil {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(r.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalFlushTimeout)
			defer cancel()
			return r.Flush(fctx)
		case <-t.C:
			_ = r.Flush(ctx) // kept for the next one, and reported as an event
		}
	}
}

// Close flushes a last time and stops recording: the observer callbacks
// and TransportEvent do nothing afterwards. It returns the flush's error;
// the rows it could not write are lost with the Recorder.
func (r *Recorder) Close(ctx context.Context) error {
	err := r.Flush(ctx)
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	return err
}

// put is one row to write and the change count it carries.
type put struct {
	row store.UsageRow
	k   rowKey
	ver uint64
}

// Flush writes the rows changed since the last flush to the store: for
// each dimension with changes, one PutUsage call with its rows (every
// caller's minute and hour), each this writer's absolute totals for its
// minute or hour. A dimension without changes is not written. Rows a
// failed call did not write are kept for the next flush; writing them
// again is harmless, as a row replaces its previous version; rows the
// store refuses as invalid (store.ErrInvalid), or because it keeps no
// history (errors.ErrUnsupported: the Recorder then keeps the live view
// only), are dropped. It does
// nothing, and returns nil, when the Recorder writes nothing.
func (r *Recorder) Flush(ctx context.Context) error {
	if r.usage() == nil {
		return nil
	}
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	r.lastPut = max(r.now().UnixMilli(), r.lastPut+1)
	byDim, sec := r.collect(time.UnixMilli(r.lastPut).UTC())
	r.mu.Lock()
	dropped := r.dropped
	r.dropped = 0
	r.mu.Unlock()
	if dropped > 0 {
		r.event(EventStoreError, "", fmt.Sprintf("history: %d minute rows dropped: %d rows were waiting for the store already", dropped, r.maxPending))
	}
	dims := make([]string, 0, len(byDim))
	for d := range byDim {
		dims = append(dims, d)
	}
	slices.Sort(dims)
	var errs []error
	for _, d := range dims {
		puts, bad := r.valid(byDim[d], sec)
		if bad != nil {
			// A row no store would take (a caller name too long, say): it
			// is dropped alone, so that the dimension's others are written.
			errs = append(errs, bad)
			r.event(EventStoreError, d, bad.Error())
		}
		if len(puts) == 0 {
			continue
		}
		rows := make([]store.UsageRow, len(puts))
		for i, p := range puts {
			rows[i] = p.row
		}
		if err := r.st.PutUsage(ctx, rows, r.ret); err != nil {
			err = fmt.Errorf("history: write usage of %q (%d rows): %w", d, len(rows), err)
			errs = append(errs, err)
			r.event(EventStoreError, d, err.Error())
			if !errors.Is(err, store.ErrInvalid) && !r.unsupported(err) {
				continue // kept for the next flush
			}
			// The store refuses these rows for good (they are invalid, or
			// it keeps no history, as a DynamoDB store without its usage
			// table): sending them again would fail again, and keep them
			// in memory forever.
		}
		r.written(puts, sec)
	}
	return errors.Join(errs...)
}

// valid returns the puts whose rows the store's rules accept, and an
// error naming the others, which it notes as written (dropped): sending
// them again would fail again.
func (r *Recorder) valid(puts []put, sec int64) ([]put, error) {
	ok := puts[:0:0]
	var bad []put
	var first error
	for _, p := range puts {
		if err := store.ValidateUsage([]store.UsageRow{p.row}, r.ret); err != nil {
			bad = append(bad, p)
			first = cmp.Or(first, err)
			continue
		}
		ok = append(ok, p)
	}
	if bad == nil {
		return puts, nil
	}
	r.written(bad, sec)
	return ok, fmt.Errorf("history: %d usage rows dropped: %w", len(bad), first)
}

// collect returns the rows with changes the store lacks, by dimension, and
// ends the rows whose period is over, at the Recorder's second, which it
// returns too.
func (r *Recorder) collect(now time.Time) (map[string][]put, int64) {
	out := make(map[string][]put)
	add := func(k rowKey, a *acc) {
		if !a.dirty() {
			return
		}
		out[k.dim] = append(out[k.dim], put{k: k, ver: a.ver, row: store.UsageRow{
			Dimension: k.dim, Caller: k.caller, Period: time.Duration(k.period) * time.Second,
			Start: time.Unix(k.start, 0).UTC(), Writer: r.writer, Counters: a.t.counters(), Updated: now,
		}})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	sec := r.second() // the events' own time, which never goes back
	for _, s := range r.series {
		r.roll(s, sec)
		for _, p := range [2]int64{60, 3600} {
			if a := s.row(p); a.start != 0 {
				add(rowKey{s.key, p, a.start}, a)
			}
		}
	}
	for k, a := range r.pending {
		if !a.dirty() && k.start+k.period <= sec {
			delete(r.pending, k) // parked clean, and over
			continue
		}
		if k.start+k.period+int64(r.ret.For(time.Duration(k.period)*time.Second)/time.Second) <= sec {
			delete(r.pending, k) // past its retention: no store would keep it
			continue
		}
		add(k, a)
	}
	return out, sec
}

// written notes that the store has puts: a row unchanged since is clean,
// and a pending one whose period is over is forgotten.
func (r *Recorder) written(puts []put, now int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range puts {
		a := r.pending[p.k]
		if a == nil {
			if s := r.series[p.k.key]; s != nil {
				if c := s.row(p.k.period); c.start == p.k.start {
					a = c
				}
			}
		}
		if a == nil {
			continue
		}
		a.sent = max(a.sent, p.ver)
		if a.dirty() {
			continue
		}
		if q := r.pending[p.k]; q == a && p.k.start+p.k.period <= now {
			delete(r.pending, p.k)
		}
	}
}
