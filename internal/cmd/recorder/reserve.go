package recorder

import (
	"context"
	"time"

	"github.com/ontopix/sluice/internal/cmd/verify"
	"github.com/ontopix/sluice/store"
)

// maxPending bounds the reservations remembered for their cancellation
// before those already valid are forgotten (a cancellation then gives
// nothing back).
const maxPending = 4096

// Reserve implements store.Store, recording a grant event per item at the
// reservation's valid instant.
func (s *Store) Reserve(ctx context.Context, req *store.ReserveRequest, res *store.ReserveResult) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	req.Now = s.now(req.Now)
	if err := s.Forward.Reserve(ctx, req, res); err != nil {
		return err
	}
	s.decided(res.Items, res.Granted, res.ValidAt)
	if res.Granted && res.ValidAt.After(req.Now) {
		s.remember(req.ID, res.ValidAt)
	}
	return nil
}

// remember keeps id's valid instant for a cancellation; the caller holds
// s.mu.
func (s *Store) remember(id store.LeaseID, validAt time.Time) {
	if s.pending == nil {
		s.pending = map[store.LeaseID]time.Time{}
	}
	if len(s.pending) >= maxPending {
		for k, v := range s.pending {
			if v.UnixMilli() <= s.last {
				delete(s.pending, k)
			}
		}
	}
	s.pending[id] = validAt
}

// Cancel implements store.Store, recording what a cancellation gave back
// as a refund at the reservation's valid instant, and no longer counting
// the grant.
func (s *Store) Cancel(ctx context.Context, req store.CancelRequest) (store.CancelResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	req.Now = s.now(req.Now)
	res, err := s.Forward.Cancel(ctx, req)
	if err != nil {
		return res, err
	}
	at, ok := s.pending[req.ID]
	delete(s.pending, req.ID)
	if !ok {
		at = req.ValidAt
	}
	if at.IsZero() {
		at = req.Now
	}
	if res.Cancelled {
		for _, it := range req.Items {
			s.counts(it.Dimension).Granted--
		}
	}
	for _, r := range res.Returned {
		s.counts(r.Dimension).Milli -= r.Amount
		if res.Cancelled && req.Recorded {
			// The record's items are not in the request: count the grant
			// off by what came back.
			s.counts(r.Dimension).Granted--
		}
		s.events = append(s.events, verify.Event{Time: at, Dimension: r.Dimension, Kind: verify.Settle, Milli: -r.Amount})
	}
	return res, nil
}
