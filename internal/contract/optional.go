package contract

import (
	"context"
	"errors"
	"fmt"

	"github.com/ontopix/sluice/store"
)

// Unsupported returns the error of optional operation op called on a
// store that does not implement it: it matches errors.ErrUnsupported.
func Unsupported(op string) error {
	return fmt.Errorf("sluice: store: %s: %w (the store does not implement it)", op, errors.ErrUnsupported)
}

// AsQueuer returns s as a store.Queuer: s itself when it implements one,
// otherwise s with Reserve, Cancel and Dequeue that change nothing and
// return an error matching errors.ErrUnsupported. A store that wraps
// another forwards its optional methods through it.
func AsQueuer(s store.Store) store.Queuer {
	if q, ok := s.(store.Queuer); ok {
		return q
	}
	return noQueue{s}
}

// AsCooler is AsQueuer for store.Cooler.
func AsCooler(s store.Store) store.Cooler {
	if c, ok := s.(store.Cooler); ok {
		return c
	}
	return noCooldown{s}
}

// AsSyncer is AsQueuer for store.Syncer.
func AsSyncer(s store.Store) store.Syncer {
	if y, ok := s.(store.Syncer); ok {
		return y
	}
	return noSync{s}
}

// AsUsager is AsQueuer for store.Usager.
func AsUsager(s store.Store) store.Usager {
	if u, ok := s.(store.Usager); ok {
		return u
	}
	return noUsage{s}
}

type noQueue struct{ store.Store }

func (noQueue) Reserve(context.Context, *store.ReserveRequest, *store.ReserveResult) error {
	return Unsupported("reserve")
}

func (noQueue) Cancel(context.Context, store.CancelRequest) (store.CancelResult, error) {
	return store.CancelResult{}, Unsupported("cancel")
}

func (noQueue) Dequeue(context.Context, store.DequeueRequest) error {
	return Unsupported("dequeue")
}

type noCooldown struct{ store.Store }

func (noCooldown) Cooldown(context.Context, store.CooldownRequest) (store.CooldownResult, error) {
	return store.CooldownResult{}, Unsupported("cooldown")
}

type noUsage struct{ store.Store }

func (noUsage) PutUsage(context.Context, []store.UsageRow, store.UsageRetention) error {
	return Unsupported("put usage")
}

func (noUsage) ListUsage(context.Context, store.UsageQuery) ([]store.UsageRow, error) {
	return nil, Unsupported("list usage")
}

type noSync struct{ store.Store }

func (noSync) Sync(context.Context, store.SyncRequest) (store.SyncResult, error) {
	return store.SyncResult{}, Unsupported("sync")
}

// Forward is the store it embeds with every optional operation of the
// contract (store.Queuer, store.Cooler, store.Syncer, store.Usager) forwarded to it, or
// answered with an error matching errors.ErrUnsupported when it lacks
// one. A wrapper that embeds Forward in place of store.Store keeps the
// capabilities of the store it wraps.
type Forward struct{ store.Store }

var (
	_ store.Queuer = Forward{}
	_ store.Cooler = Forward{}
	_ store.Syncer = Forward{}
	_ store.Usager = Forward{}
)

// Reserve forwards to AsQueuer(f.Store).
func (f Forward) Reserve(ctx context.Context, req *store.ReserveRequest, res *store.ReserveResult) error {
	return AsQueuer(f.Store).Reserve(ctx, req, res)
}

// Cancel forwards to AsQueuer(f.Store).
func (f Forward) Cancel(ctx context.Context, req store.CancelRequest) (store.CancelResult, error) {
	return AsQueuer(f.Store).Cancel(ctx, req)
}

// Dequeue forwards to AsQueuer(f.Store).
func (f Forward) Dequeue(ctx context.Context, req store.DequeueRequest) error {
	return AsQueuer(f.Store).Dequeue(ctx, req)
}

// Cooldown forwards to AsCooler(f.Store).
func (f Forward) Cooldown(ctx context.Context, req store.CooldownRequest) (store.CooldownResult, error) {
	return AsCooler(f.Store).Cooldown(ctx, req)
}

// Sync forwards to AsSyncer(f.Store).
func (f Forward) Sync(ctx context.Context, req store.SyncRequest) (store.SyncResult, error) {
	return AsSyncer(f.Store).Sync(ctx, req)
}

// PutUsage forwards to AsUsager(f.Store).
func (f Forward) PutUsage(ctx context.Context, rows []store.UsageRow, r store.UsageRetention) error {
	return AsUsager(f.Store).PutUsage(ctx, rows, r)
}

// ListUsage forwards to AsUsager(f.Store).
func (f Forward) ListUsage(ctx context.Context, q store.UsageQuery) ([]store.UsageRow, error) {
	return AsUsager(f.Store).ListUsage(ctx, q)
}
