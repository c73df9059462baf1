package store

import (
	"context"
	"time"
)

// WithDefaultTimeout applies the contract's rule on deadlines (see the
// package comment) for a store whose own timeout is d: it returns ctx
// bounded by d when ctx carries no deadline and d is positive, and ctx
// as it is otherwise, never shortening or lengthening a deadline the
// caller set. cancel is never nil.
func WithDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || d <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}
