package sluice

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"

	"github.com/ontopix/sluice/store"
)

// WithObserver sets the hooks the client calls on its decisions (see
// Observer); combine several with Observers. Default: none, at no cost.
func WithObserver(o *Observer) Option { return func(cl *Client) { cl.obs = o } }

// storeFailed reports a failed store call to the observer.
func (c *Client) storeFailed(ctx context.Context, op string, err error) {
	if o := c.obs; o != nil && o.StoreError != nil {
		o.StoreError(ctx, StoreErrorEvent{Op: op, Kind: errorKind(err), Err: err})
	}
}

// errorKind classifies a store error for StoreErrorEvent.
func errorKind(err error) StoreErrorKind {
	switch {
	case errors.Is(err, store.ErrUnavailable):
		return KindUnavailable
	case errors.Is(err, store.ErrContention):
		return KindContention
	case errors.Is(err, store.ErrClosed):
		return KindClosed
	case errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrUnknownDimension),
		errors.Is(err, store.ErrCostExceedsCapacity):
		return KindInvalid
	}
	return KindOther
}

// loggedItems renders a lease's dimensions in log events with snake_case
// keys: [{"dimension":"openai#tpm","cost":500}] in JSON, and
// "openai#tpm=500 …" in text.
type loggedItems []Request

// MarshalJSON implements json.Marshaler.
func (li loggedItems) MarshalJSON() ([]byte, error) {
	type item struct {
		Dimension string `json:"dimension"`
		Cost      int64  `json:"cost"`
	}
	out := make([]item, len(li))
	for i, it := range li {
		out[i] = item(it)
	}
	return json.Marshal(out)
}

// MarshalText implements encoding.TextMarshaler, for text handlers.
func (li loggedItems) MarshalText() ([]byte, error) {
	var b strings.Builder
	for i, it := range li {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(it.Dimension)
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(it.Cost, 10))
	}
	return []byte(b.String()), nil
}

// leaseEvent logs msg at debug level with the lease's id and dimensions;
// the lease's lock is held.
func (c *Client) leaseEvent(ctx context.Context, msg string, l *Lease) {
	if !c.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	c.log.LogAttrs(ctx, slog.LevelDebug, msg, slog.String("lease", l.ID()),
		slog.Any("dimensions", loggedItems(append([]Request(nil), l.items...))))
}
