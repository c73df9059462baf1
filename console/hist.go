package console

import (
	"context"
	"time"
)

// historian is what the console reads from a usage history; a
// *history.Recorder has these methods. It is an interface so that the
// pages can be tested against a recorded history as well as a live one.
type historian interface {
	Query(ctx context.Context, q hQuery) ([]hPoint, error)
	Callers(ctx context.Context, dimension string, from, to time.Time) (map[string]hCounts, error)
	Live(dimension string) hCounts
	Events(n int) []hEvent
}

// The types below mirror package history's until it is merged.
type hQuery struct {
	Dimension, Caller string
	From, To          time.Time
	Step              time.Duration
}

type hPoint struct {
	Start  time.Time
	Counts hCounts
}

type hCounts struct {
	Grants, Refusals, Degraded, Errors int64
	Waits                              int64
	WaitSum                            time.Duration
	WaitHist                           []int64
	Reserved, Settled, Debt            int64
	Responses                          map[string]int64
	MinRemaining                       int64
	Unmetered                          int64
}

type hEvent struct {
	Time                    time.Time
	Kind, Dimension, Detail string
	Count                   int
}

var waitBounds = []time.Duration{10 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2500 * time.Millisecond, 5 * time.Second,
	10 * time.Second, 30 * time.Second, time.Minute}
