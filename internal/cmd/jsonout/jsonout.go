// Package jsonout holds the JSON forms the command line prints, so that
// every command speaks one dialect: snake_case keys, limit types as words
// ("requests", "tokens", "concurrent") and durations as strings ("1.5s").
package jsonout

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ontopix/sluice/bucket"
)

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string without trailing zero units: "1.5s", "250ms", "1m", "1h30m".
type Duration time.Duration

// String returns d as MarshalJSON writes it, unquoted.
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.String())
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string such as \"1.5s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Config is a bucket.Config as JSON shows it.
type Config struct {
	Type         string   `json:"type"`
	Capacity     int64    `json:"capacity"`
	RefillAmount int64    `json:"refill_amount"`
	RefillPeriod Duration `json:"refill_period"`
	CostPerCall  int64    `json:"cost_per_call"`
	MaxDebt      int64    `json:"max_debt"`
}

// ConfigOf returns c's JSON form, with the cost per call and maximum debt
// in effect (defaults resolved).
func ConfigOf(c bucket.Config) Config {
	return Config{Type: c.Type.String(), Capacity: c.Capacity, RefillAmount: c.RefillAmount,
		RefillPeriod: Duration(c.RefillPeriod), CostPerCall: c.Cost(), MaxDebt: c.Debt()}
}

// Bucket returns the bucket.Config c describes.
func (c Config) Bucket() (bucket.Config, error) {
	t, err := bucket.ParseType(c.Type)
	if err != nil {
		return bucket.Config{}, err
	}
	return bucket.Config{Type: t, Capacity: c.Capacity, RefillAmount: c.RefillAmount,
		RefillPeriod: time.Duration(c.RefillPeriod), CostPerCall: c.CostPerCall, MaxDebt: c.MaxDebt}, nil
}
