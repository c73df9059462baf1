package remotestore

// The store door: the server side of a remote store. Each operation of the
// store contract is a POST of its request, in JSON, to
// Prefix+<Operation>; the answer is an answer: its result in JSON and its
// error, or an error alone with status 4xx when the door itself refuses
// it. WatchFreed streams the names of freed dimensions, one per line.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// maxBody bounds a request's body.
const maxBody = 1 << 20

// Handler returns the store door to st, to mount at Prefix: what
// remotestore opens on the other side. The door passes requests through
// unchanged: the remote process's Client keeps its own clock, waits and
// retries, and st decides as it does for a process that reaches it
// directly. It is raw store access (it can create and delete buckets):
// put authentication in front of it.
func Handler(st store.Store) http.Handler {
	// The operations go through st as given (its checks included); the
	// capabilities and the freed-slot stream are those of the store
	// behind the portable layer's checks, which hide them.
	return &door{st: st, caps: contract.Unwrap(st), ops: operations(st)}
}

type door struct {
	st   store.Store
	caps store.Store // st without the portable layer's checks
	ops  map[string]func(ctx context.Context, body []byte) (any, error)
}

func (d *door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, Prefix)
	switch name {
	case "Capabilities":
		writeJSON(w, capabilitiesOf(d.caps))
		return
	case "WatchFreed":
		d.watch(w, r)
		return
	}
	op, ok := d.ops[name]
	if !ok || r.Method != http.MethodPost {
		writeError(w, http.StatusNotFound, fmt.Errorf("remotestore: no operation %q (POST %s<Operation>)", name, Prefix))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("remotestore: %w", err))
		return
	}
	res, err := op(r.Context(), body)
	ans := answer{}
	if ans.Result, err = marshalResult(res, err); err != nil {
		ans.Error = encodeError(err)
	}
	writeJSON(w, ans)
}

// marshalResult encodes an operation's result, and passes its error on.
func marshalResult(res any, err error) (json.RawMessage, error) {
	if res == nil {
		return nil, err
	}
	b, merr := json.Marshal(res)
	if merr != nil {
		return nil, errors.Join(err, merr)
	}
	return b, err
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(encodeError(err))
}

func capabilitiesOf(st store.Store) capabilities {
	var c capabilities
	_, c.Queuer = st.(store.Queuer)
	_, c.Cooler = st.(store.Cooler)
	_, c.Syncer = st.(store.Syncer)
	_, c.FreedWatcher = st.(store.FreedWatcher)
	_, c.Usager = st.(store.Usager)
	if cc, ok := st.(store.CallerClock); ok {
		c.CallerClock = cc.CallerClock()
	}
	return c
}

// watch streams the store's freed notices, a dimension per line, until
// the caller goes away; a store without them sends nothing.
func (d *door) watch(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	fw, watches := d.caps.(store.FreedWatcher)
	if !ok || !watches {
		writeError(w, http.StatusNotFound, fmt.Errorf("remotestore: the store sends no freed notices"))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	notices := make(chan string, 1024)
	ctx := r.Context()
	go func() {
		_ = fw.WatchFreed(ctx, func(dim string) {
			select {
			case notices <- dim:
			default: // a full buffer loses the notice: waiters poll anyway
			}
		})
	}()
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case dim := <-notices:
			if _, err := fmt.Fprintln(w, dim); err != nil {
				return
			}
			fl.Flush()
		case <-keepAlive.C:
			if _, err := fmt.Fprintln(w); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

// operations maps each operation the store implements to its handler.
func operations(st store.Store) map[string]func(context.Context, []byte) (any, error) {
	ops := map[string]func(context.Context, []byte) (any, error){
		"Acquire": func(ctx context.Context, b []byte) (any, error) {
			var req store.AcquireRequest
			if err := decode(b, &req); err != nil {
				return nil, err
			}
			var res store.AcquireResult
			err := st.Acquire(ctx, &req, &res)
			return &res, err
		},
		"Release":      serve(st.Release),
		"Adjust":       serve(st.Adjust),
		"Extend":       serve(st.Extend),
		"Penalize":     serve(st.Penalize),
		"Peek":         serve(st.Peek),
		"Reconcile":    serve(st.Reconcile),
		"PutBucket":    serveErr(st.PutBucket),
		"DeleteBucket": serveErr(st.DeleteBucket),
		"ListBuckets":  serve(st.ListBuckets),
		"Leases":       serve(st.Leases),
	}
	if q, ok := st.(store.Queuer); ok {
		ops["Reserve"] = func(ctx context.Context, b []byte) (any, error) {
			var req store.ReserveRequest
			if err := decode(b, &req); err != nil {
				return nil, err
			}
			var res store.ReserveResult
			err := q.Reserve(ctx, &req, &res)
			return &res, err
		}
		ops["Cancel"] = serve(q.Cancel)
		ops["Dequeue"] = serveErr(q.Dequeue)
	}
	if c, ok := st.(store.Cooler); ok {
		ops["Cooldown"] = serve(c.Cooldown)
	}
	if y, ok := st.(store.Syncer); ok {
		ops["Sync"] = serve(y.Sync)
	}
	if u, ok := st.(store.Usager); ok {
		ops["PutUsage"] = serveErr(func(ctx context.Context, p usagePut) error { return u.PutUsage(ctx, p.Rows, p.Retention) })
		ops["ListUsage"] = serve(u.ListUsage)
	}
	return ops
}

func serve[Req, Res any](f func(context.Context, Req) (Res, error)) func(context.Context, []byte) (any, error) {
	return func(ctx context.Context, b []byte) (any, error) {
		var req Req
		if err := decode(b, &req); err != nil {
			return nil, err
		}
		res, err := f(ctx, req)
		return res, err
	}
}

func serveErr[Req any](f func(context.Context, Req) error) func(context.Context, []byte) (any, error) {
	return func(ctx context.Context, b []byte) (any, error) {
		var req Req
		if err := decode(b, &req); err != nil {
			return nil, err
		}
		return struct{}{}, f(ctx, req)
	}
}

func decode(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("remotestore: malformed request: %w: %w", store.ErrInvalid, err)
	}
	return nil
}
