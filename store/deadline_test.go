package store

import (
	"context"
	"testing"
	"time"
)

func TestWithDefaultTimeoutKeepsTheCallersDeadline(t *testing.T) {
	own, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Hour))
	defer cancel()
	want, _ := own.Deadline()
	ctx, cancel := WithDefaultTimeout(own, time.Second)
	defer cancel()
	if got, ok := ctx.Deadline(); !ok || !got.Equal(want) {
		t.Errorf("deadline %v (set %t), want the caller's %v", got, ok, want)
	}
}

func TestWithDefaultTimeoutBoundsAContextWithout(t *testing.T) {
	before := time.Now()
	ctx, cancel := WithDefaultTimeout(context.Background(), time.Minute)
	defer cancel()
	got, ok := ctx.Deadline()
	if !ok || got.Before(before.Add(time.Minute)) || got.After(time.Now().Add(time.Minute)) {
		t.Errorf("deadline %v (set %t), want one minute from the call", got, ok)
	}
	ctx, cancel = WithDefaultTimeout(context.Background(), 0)
	defer cancel()
	if d, ok := ctx.Deadline(); ok {
		t.Errorf("timeout 0: deadline %v, want none", d)
	}
}
