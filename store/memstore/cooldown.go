package memstore

import (
	"context"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// Cooldown implements store.Cooler.
func (s *Store) Cooldown(ctx context.Context, req store.CooldownRequest) (store.CooldownResult, error) {
	var res store.CooldownResult
	err := s.timeBased(req.Dimension, "cooldown", func(e *entry) {
		st := e.st
		at, _ := bucket.Align(e.lim, st, req.Now.UnixMilli(), skewMs)
		res.Before = bucket.Available(e.lim, st, at)
		until := at + req.Until.Sub(req.Now).Milliseconds()
		e.st = bucket.Cooldown(e.lim, st, at, until)
		res.After, res.Until = e.st.Tokens, e.st.Until
	})
	return res, err
}

// Sync implements store.Syncer.
func (s *Store) Sync(ctx context.Context, req store.SyncRequest) (store.SyncResult, error) {
	var res store.SyncResult
	err := s.timeBased(req.Dimension, "sync", func(e *entry) {
		st := e.st
		at, _ := bucket.Align(e.lim, st, req.Now.UnixMilli(), skewMs)
		res.Before = bucket.Available(e.lim, st, at)
		e.st = bucket.Sync(e.lim, st, at, req.Remaining*bucket.Milli)
		res.After = e.st.Tokens
	})
	return res, err
}

// timeBased runs f on the named time-based bucket under its lock.
func (s *Store) timeBased(dimension, op string, f func(*entry)) error {
	if err := s.check(); err != nil {
		return err
	}
	e := s.lookup(dimension)
	if e == nil {
		return &store.ConfigurationError{Dimension: dimension}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.deleted {
		return &store.ConfigurationError{Dimension: dimension}
	}
	if err := e.b.CheckCoolable(op); err != nil {
		return err
	}
	f(e)
	return nil
}
