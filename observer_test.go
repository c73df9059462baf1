package sluice

import (
	"context"
	"testing"
)

func TestObserversFanOut(t *testing.T) {
	var got []string
	a := &Observer{Acquired: func(context.Context, AcquireEvent) { got = append(got, "a") }}
	b := &Observer{
		Acquired:   func(context.Context, AcquireEvent) { got = append(got, "b") },
		StoreError: func(_ context.Context, e StoreErrorEvent) { got = append(got, e.Kind.String()) },
	}
	o := Observers(a, nil, b)
	o.Acquired(context.Background(), AcquireEvent{})
	o.StoreError(context.Background(), StoreErrorEvent{Kind: KindContention})
	if want := []string{"a", "b", "contention"}; !equalStrings(got, want) {
		t.Errorf("calls = %v, want %v", got, want)
	}
	if o.Settled != nil {
		t.Error("Settled is set although no observer sets it")
	}
	if Observers(nil, a) != a {
		t.Error("Observers of one observer does not return it")
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
