package memstore

import (
	"context"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// PutBucket implements store.Store.
func (s *Store) PutBucket(ctx context.Context, req store.PutBucketRequest) error {
	if err := s.check(); err != nil {
		return err
	}
	ms, b := req.Now.UnixMilli(), req.Bucket
	lim := b.Config.Limits()
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.lookup(b.Name); e != nil {
		e.mu.Lock()
		defer e.mu.Unlock()
		if err := store.PutConflict(req, true, e.b.Config); err != nil {
			return err
		}
		if err := store.CheckTypeChange(e.b, b); err != nil {
			return err
		}
		st := e.st
		at, _ := bucket.Align(e.lim, st, ms, skewMs)
		e.b, e.lim, e.st = b, lim, bucket.Reconfigure(e.lim, lim, st, at, req.Reset)
		return nil
	}
	if err := store.PutConflict(req, false, bucket.Config{}); err != nil {
		return err
	}
	old := *s.buckets.Load()
	m := make(map[string]*entry, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[b.Name] = &entry{name: b.Name, b: b, lim: lim, st: bucket.State{Tokens: req.StartTokens(), Last: ms}}
	s.buckets.Store(&m)
	return nil
}

// DeleteBucket implements store.Store.
func (s *Store) DeleteBucket(ctx context.Context, req store.DeleteBucketRequest) error {
	if err := s.check(); err != nil {
		return err
	}
	name := req.Name
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.buckets.Load()
	e := old[name]
	if e == nil {
		return &store.ConfigurationError{Dimension: name}
	}
	m := make(map[string]*entry, len(old))
	for k, v := range old {
		if k != name {
			m[k] = v
		}
	}
	s.buckets.Store(&m)
	e.mu.Lock()
	e.deleted = true
	e.mu.Unlock()
	return nil
}

// ListBuckets implements store.Store.
func (s *Store) ListBuckets(ctx context.Context, req store.ListBucketsRequest) ([]store.BucketState, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	ms := req.Now.UnixMilli()
	m := *s.buckets.Load()
	out := make([]store.BucketState, 0, len(m))
	for _, e := range m {
		e.mu.Lock()
		if !e.deleted {
			out = append(out, e.state(ms))
		}
		e.mu.Unlock()
	}
	return out, nil
}
