package dynamostore

import (
	"context"

	"github.com/ontopix/sluice/store"
)

// Peek implements store.Store: one consistent read (GetItem or
// BatchGetItem) of the named rows.
func (s *Store) Peek(ctx context.Context, req store.PeekRequest) ([]store.BucketState, error) {
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return nil, err
	}
	ms, dimensions := req.Now.UnixMilli(), req.Dimensions
	bis, err := s.readBuckets(ctx, dimensions)
	if err != nil {
		return nil, err
	}
	out := make([]store.BucketState, len(bis))
	for i, bi := range bis {
		out[i] = bi.state(ms, s.skew)
	}
	return out, nil
}
