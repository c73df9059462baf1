package service

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/ontopix/sluice"
	sluicev1 "github.com/ontopix/sluice/service/gen/sluice/v1"
	"github.com/ontopix/sluice/store"
)

// fingerprint identifies a request's content (its key included, which the
// calls compared share).
func fingerprint(m proto.Message) [sha256.Size]byte {
	if m == nil {
		return [sha256.Size]byte{}
	}
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	return sha256.Sum256(b)
}

// requests converts a request's items. A zero cost is the bucket's cost
// per call.
func requests(items []*sluicev1.Item) ([]sluice.Request, error) {
	if len(items) == 0 || len(items) > store.MaxItems {
		return nil, invalidArg("items", len(items), fmt.Sprintf("an acquisition names 1 to %d dimensions", store.MaxItems))
	}
	reqs := make([]sluice.Request, len(items))
	for i, it := range items {
		if it.GetDimension() == "" {
			return nil, invalidArg(fmt.Sprintf("items[%d].dimension", i), "", "is required")
		}
		if it.GetCost() < 0 {
			return nil, invalidArg("cost["+it.GetDimension()+"]", it.GetCost(), "must be at least 0 (0 is the bucket's cost per call)")
		}
		reqs[i] = sluice.Request{Dimension: it.GetDimension(), Cost: it.GetCost()}
	}
	return reqs, nil
}

// acquireOptions converts a request's TTL and caller.
func acquireOptions(ttl *durationpb.Duration, caller string) ([]sluice.AcquireOption, error) {
	var opts []sluice.AcquireOption
	if ttl != nil {
		if err := ttl.CheckValid(); err != nil || ttl.AsDuration() <= 0 {
			return nil, invalidArg("ttl", ttl.AsDuration(), "must be a positive duration")
		}
		opts = append(opts, sluice.WithTTL(ttl.AsDuration()))
	}
	if caller != "" {
		opts = append(opts, sluice.WithCaller(caller))
	}
	return opts, nil
}

func dimensionResults(rs []sluice.DimensionResult) []*sluicev1.DimensionResult {
	out := make([]*sluicev1.DimensionResult, len(rs))
	for i, r := range rs {
		out[i] = &sluicev1.DimensionResult{
			Dimension:      r.Dimension,
			Type:           r.Type.String(),
			Cost:           r.Cost,
			Capacity:       r.Capacity,
			RemainingMilli: int64(r.Remaining),
		}
		if r.RetryIn > 0 {
			out[i].RetryIn = durationpb.New(r.RetryIn)
		}
	}
	return out
}

func leaseMessage(h string, l *sluice.Lease) *sluicev1.Lease {
	m := &sluicev1.Lease{
		Id:        h,
		CreatedAt: timestamp(l.CreatedAt()),
		ExpiresAt: timestamp(l.ExpiresAt()),
		Caller:    l.Caller(),
	}
	for _, r := range l.Dimensions() {
		m.Items = append(m.Items, &sluicev1.Item{Dimension: r.Dimension, Cost: r.Cost})
	}
	return m
}

func bucketState(st sluice.BucketState) *sluicev1.BucketState {
	m := &sluicev1.BucketState{
		Dimension:    st.Name,
		Type:         st.Type.String(),
		Capacity:     st.Capacity,
		RefillAmount: st.RefillAmount,
		TokensMilli:  int64(st.Tokens),
		ActiveLeases: int64(st.ActiveLeases),
		Now:          timestamp(st.Now),
	}
	if st.RefillPeriod > 0 {
		m.RefillPeriod = durationpb.New(st.RefillPeriod)
	}
	if st.CoolingDown() {
		m.CooldownUntil = timestamp(st.CooldownUntil)
	}
	return m
}

// timestamp converts t; the zero time is unset.
func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// invalidArg is an InvalidArgument error naming the field and the value.
func invalidArg(field string, v any, why string) error {
	return connect.NewError(connect.CodeInvalidArgument, &sluice.FieldError{Field: field, Value: v, Reason: why})
}

// errNotHeld explains a lease id this server does not hold.
func errNotHeld(h string) error {
	return fmt.Errorf("service: lease %q is not held by this server: it was released or expired, or another server granted it (send a lease's calls to the server that granted it)", h)
}

// toConnect gives a library error the Connect code that matches it.
func toConnect(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	return connect.NewError(code(err), err)
}

func code(err error) connect.Code {
	switch {
	case errors.Is(err, sluice.ErrInvalid), errors.Is(err, sluice.ErrCostExceedsCapacity):
		return connect.CodeInvalidArgument
	case errors.Is(err, sluice.ErrUnknownDimension), errors.Is(err, sluice.ErrUnknownLease):
		return connect.CodeNotFound
	case errors.Is(err, sluice.ErrLeaseInUse):
		return connect.CodeAlreadyExists
	case errors.Is(err, sluice.ErrLeaseExpired), errors.Is(err, sluice.ErrLeaseReleased):
		return connect.CodeFailedPrecondition
	case errors.Is(err, sluice.ErrUnavailable), errors.Is(err, sluice.ErrClosed):
		return connect.CodeUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		return connect.CodeDeadlineExceeded
	case errors.Is(err, context.Canceled):
		return connect.CodeCanceled
	}
	return connect.CodeUnknown
}

// dedupe runs f once per (method, principal, caller, key) within
// idempotencyWindow and answers a repeated call with the first call's
// answer. An empty key runs f every time. The key sent again with another
// request m (other items, TTL or wait) is refused: the first answer would
// not be this request's, and what it asks for would go uncharged.
func dedupe[T any](ctx context.Context, s *Server, method, caller, key string, m proto.Message, f func() (*T, error)) (*T, error) {
	if key == "" {
		return f()
	}
	if len(key) > 256 {
		return nil, invalidArg("idempotency_key", key[:32]+"…", "must be at most 256 bytes")
	}
	full := method + "\x00" + owner(ctx) + "\x00" + caller + "\x00" + key
	fp := fingerprint(m)
	for {
		e, own := s.keys.claim(full, fp, time.Now())
		if e == nil {
			return nil, connect.NewError(connect.CodeResourceExhausted, errors.New("service: too many idempotency keys in the last minute"))
		}
		if e.fp != fp {
			return nil, invalidArg("idempotency_key", key, "was sent in the last minute with another request: a key names one request")
		}
		if own {
			out, err := f()
			s.keys.finish(full, e, out, err, time.Now())
			return out, err
		}
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, toConnect(ctx.Err())
		}
		if e.err == nil {
			return e.answer.(*T), nil
		}
		// The call this one waited for failed (its caller may have gone
		// away), and its key was forgotten: this call runs on its own.
	}
}
