package sluice

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
)

// MaxCooldown is the longest cooldown Cooldown and CooldownFor accept: 24
// hours. A vendor's retry-after for a rate limit is seconds to minutes; a
// longer wait is a quota, not a rate.
const MaxCooldown = store.MaxCooldown

// CooldownResult reports a Cooldown.
type CooldownResult struct {
	// Before and After are the balances around the cooldown: After is 0
	// when the bucket held tokens, or the debt it was in.
	Before, After Millitokens
	// Until is the cooldown's end: the end asked for, or a later end of a
	// cooldown already running, which is never shortened. It is measured
	// from the store's decision time (see Client.Cooldown).
	Until time.Time
}

// SyncResult reports a Sync.
type SyncResult struct {
	// Before and After are the balances around the sync; After is never
	// above Before.
	Before, After Millitokens
}

// Cooldown stops the whole fleet from being granted anything on dimension
// before until, as after a vendor's 429 with a retry-after header, in one
// atomic write: the balance drops to zero if it was positive (debt is
// kept), nothing is granted before until, and from until on the bucket
// earns at its refill rate, so grants resume one at a time rather than in
// a burst. A cooldown never shortens one already running: the later end
// wins. A refund (Lease.Settle below the estimate) during the cooldown
// repays debt but lifts the balance at most to zero. A PutBucket with
// ResetTokens ends it.
//
// until must be 1 ms to MaxCooldown after the client's clock; otherwise the
// error matches ErrInvalid and names the field "until". The cooldown lasts
// until − now from the store's decision time, which is the client's clock,
// or, for a caller behind the bucket, its refill timestamp. The
// dimension must be a requests or tokens limit: a concurrent one is
// rejected with ErrInvalid naming it, and an unknown one with a
// *ConfigurationError. A store that cannot cool a bucket down (it is no
// store.Cooler) changes nothing, and the error matches
// errors.ErrUnsupported.
func (c *Client) Cooldown(ctx context.Context, dimension string, until time.Time) (CooldownResult, error) {
	return c.cooldown(ctx, dimension, c.clock.Now(), until)
}

// CooldownFor is Cooldown until d from now (the client's clock), for a
// vendor's retry-after given in seconds. d must be 1 ms to MaxCooldown;
// otherwise the error matches ErrInvalid and names the field "duration".
func (c *Client) CooldownFor(ctx context.Context, dimension string, d time.Duration) (CooldownResult, error) {
	if d < time.Millisecond || d > MaxCooldown {
		return CooldownResult{}, invalid("duration", d, "must be 1ms to 24h")
	}
	now := c.clock.Now()
	return c.cooldown(ctx, dimension, now, now.Add(d))
}

func (c *Client) cooldown(ctx context.Context, dimension string, now, until time.Time) (CooldownResult, error) {
	if c.cooler == nil {
		return CooldownResult{}, fmt.Errorf("sluice: cooldown %s: %w", dimension, contract.Unsupported("cooldown"))
	}
	req := store.CooldownRequest{Now: now, Dimension: dimension, Until: until}
	res, err := storeCall(ctx, c, "cooldown", func(ctx context.Context) (store.CooldownResult, error) {
		// Every attempt decides at its own time, for the same duration
		// (a retry after a backoff ends the cooldown that much later).
		req.Now = c.clock.Now()
		req.Until = req.Now.Add(until.Sub(now))
		return c.cooler.Cooldown(ctx, req)
	})
	out := CooldownResult{Before: Millitokens(res.Before), After: Millitokens(res.After)}
	if err == nil {
		out.Until = time.UnixMilli(res.Until).UTC()
	}
	if o := c.obs; o != nil && o.Cooled != nil {
		o.Cooled(ctx, CooldownEvent{Dimension: dimension, Until: out.Until, Before: res.Before, After: res.After, Err: err})
	}
	if err != nil {
		return CooldownResult{}, err
	}
	if c.log.Enabled(ctx, slog.LevelInfo) {
		c.log.LogAttrs(ctx, slog.LevelInfo, "cooldown.applied", slog.String("dimension", dimension),
			slog.Time("until", out.Until), slog.Int64("tokens_before_milli", res.Before), slog.Int64("tokens_after_milli", res.After))
	}
	return out, nil
}

// Sync lowers dimension's balance to remaining tokens, as a vendor reports
// in its rate-limit headers (x-ratelimit-remaining-requests and the like),
// in one atomic write. The bucket is refilled first, and the balance
// becomes the smaller of the two: a vendor that reports more than Sluice
// holds changes nothing, so other callers' grants are never handed out
// twice; debt is kept, and so is a running cooldown.
//
// remaining must be 0 to 10^12; otherwise the error matches ErrInvalid and
// names the field "remaining". The dimension must be a requests or tokens
// limit: a concurrent one is rejected with ErrInvalid naming it, and an
// unknown one with a *ConfigurationError. A store that cannot sync a
// bucket (it is no store.Syncer) changes nothing, and the error matches
// errors.ErrUnsupported.
func (c *Client) Sync(ctx context.Context, dimension string, remaining int64) (SyncResult, error) {
	if c.syncer == nil {
		return SyncResult{}, fmt.Errorf("sluice: sync %s: %w", dimension, contract.Unsupported("sync"))
	}
	req := store.SyncRequest{Now: c.clock.Now(), Dimension: dimension, Remaining: remaining}
	res, err := storeCall(ctx, c, "sync", func(ctx context.Context) (store.SyncResult, error) {
		req.Now = c.clock.Now() // every attempt decides at its own time
		return c.syncer.Sync(ctx, req)
	})
	if o := c.obs; o != nil && o.Synced != nil {
		o.Synced(ctx, SyncEvent{Dimension: dimension, Remaining: remaining, Before: res.Before, After: res.After, Err: err})
	}
	if err != nil {
		return SyncResult{}, err
	}
	if c.log.Enabled(ctx, slog.LevelDebug) {
		c.log.LogAttrs(ctx, slog.LevelDebug, "sync.applied", slog.String("dimension", dimension), slog.Int64("remaining", remaining),
			slog.Int64("tokens_before_milli", res.Before), slog.Int64("tokens_after_milli", res.After))
	}
	return SyncResult{Before: Millitokens(res.Before), After: Millitokens(res.After)}, nil
}
