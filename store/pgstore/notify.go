package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ontopix/sluice/store"
)

var _ store.FreedWatcher = (*Store)(nil)

const (
	// listenPoll bounds each wait for a notice, so that a watch notices
	// the store's Close within it.
	listenPoll = 250 * time.Millisecond
	// relisten is the wait before a watch connects again after its
	// connection failed.
	relisten = 500 * time.Millisecond
)

// freedChannel is the LISTEN/NOTIFY channel of the store's notices of
// freed units for the schema sch (sanitized or not): "sluice_freed_"
// and the schema's name, or a hash of it when that would pass
// PostgreSQL's 63-byte limit on channel names.
func freedChannel(sch string) string {
	name := strings.Trim(sch, `"`)
	if ch := "sluice_freed_" + name; len(ch) <= 63 {
		return ch
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	return fmt.Sprintf("sluice_freed_%016x", h.Sum64())
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// WatchFreed implements store.FreedWatcher with LISTEN on a dedicated
// connection, made with the pool's connection settings and its
// BeforeConnect hook but outside the pool, and made again after it fails or the server restarts (notices
// sent meanwhile are lost). Release, Dequeue and Reconcile send their
// notices with pg_notify in the statement that frees the units, so a
// notice is delivered when, and only if, the change commits. It returns
// ErrClosed within a quarter of a second of the store's Close.
func (s *Store) WatchFreed(ctx context.Context, freed func(dimension string)) error {
	for {
		if s.closed.Load() {
			return store.ErrClosed
		}
		err := s.listen(ctx, freed)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, store.ErrClosed) {
			return err
		}
		t := time.NewTimer(relisten)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// listen runs one connection's LISTEN until ctx ends, the store is
// closed (ErrClosed) or the connection fails.
func (s *Store) listen(ctx context.Context, freed func(dimension string)) error {
	pc := s.pool.Config()
	cfg := pc.ConnConfig.Copy()
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	var err error
	if pc.BeforeConnect != nil {
		// The pool's own hook (where cloud IAM tokens are set) runs for
		// this connection too, as it does for the pool's.
		err = pc.BeforeConnect(cctx, cfg)
	}
	var conn *pgx.Conn
	if err == nil {
		conn, err = pgx.ConnectConfig(cctx, cfg)
	}
	if err == nil {
		_, err = conn.Exec(cctx, "LISTEN "+pgx.Identifier{freedChannel(s.schema)}.Sanitize())
	}
	cancel()
	if conn != nil {
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
			defer cancel()
			conn.Close(cctx)
		}()
	}
	if err != nil {
		return fail("listen", err)
	}
	for {
		if s.closed.Load() {
			return store.ErrClosed
		}
		wctx, cancel := context.WithTimeout(ctx, listenPoll)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			freed(n.Payload)
		case ctx.Err() != nil:
			return ctx.Err()
		case conn.IsClosed() || !errors.Is(err, context.DeadlineExceeded):
			return fail("listen", err)
		}
	}
}
