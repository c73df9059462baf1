package bucket

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalid is matched (with errors.Is) by every validation error Sluice
// returns; the concrete error is a *FieldError naming the field and value.
var ErrInvalid = errors.New("sluice: invalid argument")

// FieldError reports an invalid value. It matches ErrInvalid.
type FieldError struct {
	// Field names what was wrong, e.g. "capacity" or "cost[openai#tpm]".
	Field string
	// Value is the rejected value.
	Value any
	// Reason says what a valid value looks like.
	Reason string
}

// Error implements error.
func (e *FieldError) Error() string {
	return fmt.Sprintf("sluice: invalid %s %q: %s", e.Field, fmt.Sprint(e.Value), e.Reason)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// LimitType is a bucket's limit type. The zero value is invalid.
type LimitType uint8

// The limit types.
const (
	// Requests limits calls per period (e.g. openai#rpm). Costs are consumed.
	Requests LimitType = 1
	// Tokens limits units per period (e.g. openai#tpm). Costs are consumed and
	// may be settled with Adjust, into debt.
	Tokens LimitType = 2
	// Concurrent limits simultaneous holders (e.g. elevenlabs#concurrent).
	// It never refills; releasing or reclaiming a lease gives its cost back.
	Concurrent LimitType = 3
)

// String returns the type's wire name: "requests", "tokens" or "concurrent".
func (t LimitType) String() string {
	switch t {
	case Requests:
		return "requests"
	case Tokens:
		return "tokens"
	case Concurrent:
		return "concurrent"
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// ParseType parses a wire name as written by String.
func ParseType(s string) (LimitType, error) {
	switch s {
	case "requests":
		return Requests, nil
	case "tokens":
		return Tokens, nil
	case "concurrent":
		return Concurrent, nil
	}
	return 0, &FieldError{Field: "limit_type", Value: s, Reason: `must be "requests", "tokens" or "concurrent"`}
}

// NoDebt, as Config.MaxDebt, forbids any debt: Adjust charges stop at zero.
const NoDebt = -1

// Config is a bucket's configuration in whole tokens. It is a plain value;
// use Validate before trusting one from outside.
type Config struct {
	// Type is the limit type. Required.
	Type LimitType
	// Capacity is the most tokens the bucket holds: the burst size. For a
	// concurrent bucket it is the number of simultaneous slots. 1..10^12.
	Capacity int64
	// RefillAmount tokens are added every RefillPeriod. Zero for concurrent
	// buckets, 1..10^12 otherwise. A RefillAmount below Capacity gives a
	// burst larger than the sustained rate.
	RefillAmount int64
	// RefillPeriod is the refill period, a whole number of milliseconds from
	// 1 ms to 366 days. Zero for concurrent buckets.
	RefillPeriod time.Duration
	// CostPerCall is the cost of an acquisition that names none. Zero means 1.
	CostPerCall int64
	// MaxDebt is how far one settlement (Adjust) may drive the balance
	// below zero, in tokens, or below its level when it is already in debt:
	// it bounds what one charge above its estimate adds, and debt is never
	// forgiven, so several such charges may go deeper. Zero means the
	// default, Capacity; NoDebt (-1) forbids debt: charges stop at zero.
	// Concurrent buckets never take debt, whatever this says.
	MaxDebt int64
}

// PerPeriod returns a time-based bucket of type t that holds capacity tokens
// and refills capacity tokens every period: the shape of a vendor's
// "N per minute" limit.
func PerPeriod(t LimitType, capacity int64, period time.Duration) Config {
	return Config{Type: t, Capacity: capacity, RefillAmount: capacity, RefillPeriod: period}
}

// ConcurrentSlots returns a concurrent bucket with n slots.
func ConcurrentSlots(n int64) Config {
	return Config{Type: Concurrent, Capacity: n}
}

// Cost returns the effective cost per call (CostPerCall, or 1 when zero).
func (c Config) Cost() int64 {
	if c.CostPerCall == 0 {
		return 1
	}
	return c.CostPerCall
}

// Debt returns the effective maximum debt one settlement may add, in tokens.
func (c Config) Debt() int64 {
	switch {
	case c.Type == Concurrent || c.MaxDebt == NoDebt:
		return 0
	case c.MaxDebt == 0:
		return c.Capacity
	}
	return c.MaxDebt
}

// Validate reports the first invalid field as a *FieldError.
func (c Config) Validate() error {
	bad := func(field string, v any, why string) error {
		return &FieldError{Field: field, Value: v, Reason: why}
	}
	if c.Type < Requests || c.Type > Concurrent {
		return bad("limit_type", c.Type, `must be "requests", "tokens" or "concurrent"`)
	}
	if c.Capacity < 1 || c.Capacity > MaxCapacity {
		return bad("capacity", c.Capacity, "must be between 1 and 10^12 tokens")
	}
	if c.CostPerCall < 0 || c.CostPerCall > c.Capacity {
		return bad("cost_per_call", c.CostPerCall, fmt.Sprintf("must be between 1 and the capacity (%d)", c.Capacity))
	}
	if c.MaxDebt < NoDebt || c.MaxDebt > MaxCapacity {
		return bad("max_debt", c.MaxDebt, "must be -1 (no debt), 0 (default: capacity) or up to 10^12 tokens")
	}
	if c.Type == Concurrent {
		if c.RefillAmount != 0 {
			return bad("refill_amount", c.RefillAmount, "must be 0 for a concurrent bucket")
		}
		if c.RefillPeriod != 0 {
			return bad("refill_period", c.RefillPeriod, "must be 0 for a concurrent bucket")
		}
		return nil
	}
	if c.RefillAmount < 1 || c.RefillAmount > MaxCapacity {
		return bad("refill_amount", c.RefillAmount, "must be between 1 and 10^12 tokens")
	}
	if c.RefillPeriod < time.Millisecond || c.RefillPeriod > MaxPeriodMs*time.Millisecond || c.RefillPeriod%time.Millisecond != 0 {
		return bad("refill_period", c.RefillPeriod, "must be a whole number of milliseconds from 1ms to 366 days")
	}
	l := c.Limits()
	if ceilMulDiv(l.Capacity-l.Floor, l.Period, l.Amount) > MaxFillMs {
		return bad("refill_amount", c.RefillAmount, fmt.Sprintf("refills too slowly: %d tokens per %s must fill capacity plus debt within 10 years", c.RefillAmount, c.RefillPeriod))
	}
	return nil
}

// Limits is a Config in the integer units the math works in.
type Limits struct {
	// Type is the limit type.
	Type LimitType
	// Capacity is the maximum balance in millitokens.
	Capacity int64
	// Amount millitokens are earned per Period; 0 for concurrent buckets.
	Amount int64
	// Period is the refill period in milliseconds; 0 for concurrent buckets.
	Period int64
	// Floor is the lowest balance one charge of Adjust may reach from a
	// balance at or above zero, in millitokens (<= 0).
	Floor int64
}

// Limits converts c to millitokens and milliseconds. It assumes c is valid.
func (c Config) Limits() Limits {
	return Limits{
		Type:     c.Type,
		Capacity: c.Capacity * Milli,
		Amount:   c.RefillAmount * Milli,
		Period:   c.RefillPeriod.Milliseconds(),
		Floor:    -c.Debt() * Milli,
	}
}
