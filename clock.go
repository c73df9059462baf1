package sluice

import "time"

// Clock tells the time used for every decision. Inject one with WithClock to
// make decisions deterministic in tests; implementations must be safe for
// concurrent use.
//
// Waiting (WithSlot, contention backoff, lease renewal) uses the runtime's
// timers, not the Clock; tests that exercise waiting run inside
// testing/synctest, where timers and time.Now are virtual.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
}

// ClockFunc adapts a function to the Clock interface.
type ClockFunc func() time.Time

// Now calls f.
func (f ClockFunc) Now() time.Time { return f() }

// SystemClock is the wall clock, the default Clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }
