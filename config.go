package sluice

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
)

// FailurePolicy says what an acquisition does when the store is unreachable.
type FailurePolicy uint8

const (
	// FailClosed, the default, returns an error matching ErrUnavailable.
	FailClosed FailurePolicy = iota
	// FailOpen grants the acquisition without the store, flagged
	// Result.Degraded and logged as acquire.degraded.
	FailOpen
)

// String returns "closed" or "open".
func (p FailurePolicy) String() string {
	if p == FailOpen {
		return "open"
	}
	return "closed"
}

// Config holds the client settings, named after the SDKs' SLUICE_*
// environment variables. The zero value is not ready to use; start from
// DefaultConfig or ConfigFromEnv.
type Config struct {
	// Store is the store URL (SLUICE_STORE), e.g. "memory://",
	// "redis://127.0.0.1:6379/0", "dynamodb://table?region=eu-west-1",
	// "postgres://…". The library itself ignores it; the CLI and the
	// service use it to build a store.Store. Default "memory://".
	Store string
	// TableName is the DynamoDB table (SLUICE_TABLE_NAME).
	TableName string
	// AWSRegion is the DynamoDB region (SLUICE_AWS_REGION).
	AWSRegion string
	// EndpointURL overrides the DynamoDB endpoint (SLUICE_ENDPOINT_URL),
	// e.g. DynamoDB Local or LocalStack.
	EndpointURL string
	// LeaseTTL is a lease's lifetime (SLUICE_LEASE_TTL, seconds or a Go
	// duration). Default 60 s.
	LeaseTTL time.Duration
	// MaxRetries bounds contention retries before answering RETRY_IN
	// (SLUICE_MAX_RETRIES). Default 3.
	MaxRetries int
	// DefaultSlotTimeout is how long Wait, Slot and WithSlot (and their
	// Many forms) wait when the context has no deadline, by the client's
	// Clock (SLUICE_DEFAULT_SLOT_TIMEOUT, seconds or a Go duration).
	// Default 30 s.
	DefaultSlotTimeout time.Duration
	// LogLevel is the minimum level of the logger the CLI builds
	// (SLUICE_LOG_LEVEL: debug, info, warn, error). Default info.
	LogLevel slog.Level
	// FailurePolicy applies when the store is unreachable
	// (SLUICE_FAILURE_POLICY: closed or open). Default FailClosed.
	FailurePolicy FailurePolicy
	// Caller names this service in lease records and logs (SLUICE_CALLER).
	Caller string
	// PollInterval caps the RETRY_IN hint of a denied concurrent dimension,
	// and is how often a reservation that waits longer reads its buckets
	// for settlements that move it (see Wait) (SLUICE_POLL_INTERVAL).
	// Default 1 s.
	PollInterval time.Duration
	// OpTimeout bounds every store call the Client makes (SLUICE_OP_TIMEOUT,
	// seconds or a Go duration): a call still unanswered after it fails with
	// an error matching ErrUnavailable, to which FailurePolicy applies. A
	// caller's own deadline that comes first applies instead, and is
	// reported as the caller's (context.DeadlineExceeded), never as the
	// store's. 0 disables it, leaving only the store's own timeouts.
	// Default 2 s.
	OpTimeout time.Duration
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Store:              "memory://",
		LeaseTTL:           60 * time.Second,
		MaxRetries:         3,
		DefaultSlotTimeout: 30 * time.Second,
		LogLevel:           slog.LevelInfo,
		PollInterval:       time.Second,
		OpTimeout:          2 * time.Second,
	}
}

// ConfigFromEnv returns DefaultConfig overridden by the SLUICE_* variables
// set in the environment. An unparsable or out-of-range value is an error
// naming the variable and the value.
func ConfigFromEnv() (Config, error) {
	return ConfigFromLookup(os.LookupEnv)
}

// ConfigFromLookup is ConfigFromEnv reading variables through lookup, for
// tests and for callers with their own configuration source.
func ConfigFromLookup(lookup func(string) (string, bool)) (Config, error) {
	c := DefaultConfig()
	// from names the variable each Config field was read from, so that an
	// error names what the user wrote.
	from := map[string]string{}
	str := func(name string, dst *string) {
		if v, ok := lookup(name); ok && v != "" {
			*dst = v
		}
	}
	str("SLUICE_STORE", &c.Store)
	str("SLUICE_TABLE_NAME", &c.TableName)
	str("SLUICE_AWS_REGION", &c.AWSRegion)
	str("SLUICE_ENDPOINT_URL", &c.EndpointURL)
	str("SLUICE_CALLER", &c.Caller)
	for _, d := range []struct {
		name, field string
		dst         *time.Duration
	}{
		{"SLUICE_LEASE_TTL", "LeaseTTL", &c.LeaseTTL},
		{"SLUICE_DEFAULT_SLOT_TIMEOUT", "DefaultSlotTimeout", &c.DefaultSlotTimeout},
		{"SLUICE_POLL_INTERVAL", "PollInterval", &c.PollInterval},
		{"SLUICE_OP_TIMEOUT", "OpTimeout", &c.OpTimeout},
	} {
		if v, ok := lookup(d.name); ok && v != "" {
			x, err := parseSeconds(v)
			if err != nil {
				return Config{}, invalid(d.name, v, err.Error())
			}
			*d.dst = x
			from[d.field] = d.name
		}
	}
	if c.Caller != DefaultConfig().Caller {
		from["Caller"] = "SLUICE_CALLER"
	}
	if v, ok := lookup("SLUICE_MAX_RETRIES"); ok && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 100 {
			return Config{}, invalid("SLUICE_MAX_RETRIES", v, "must be an integer from 0 to 100")
		}
		c.MaxRetries = n
	}
	if v, ok := lookup("SLUICE_LOG_LEVEL"); ok && v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			return Config{}, invalid("SLUICE_LOG_LEVEL", v, "must be debug, info, warn or error")
		}
	}
	if v, ok := lookup("SLUICE_FAILURE_POLICY"); ok && v != "" {
		switch strings.ToLower(v) {
		case "closed", "fail-closed":
			c.FailurePolicy = FailClosed
		case "open", "fail-open":
			c.FailurePolicy = FailOpen
		default:
			return Config{}, invalid("SLUICE_FAILURE_POLICY", v, `must be "closed" or "open"`)
		}
	}
	if err := c.Validate(); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) && from[fe.Field] != "" {
			return Config{}, invalid(from[fe.Field], fe.Value, fe.Reason)
		}
		return Config{}, err
	}
	return c, nil
}

// parseSeconds accepts a number of seconds ("60", "1.5", as the Python and
// TypeScript SDKs write them) or a Go duration ("90s", "2m").
func parseSeconds(v string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f != f || f < 0 || f > 1e9 {
			return 0, fmt.Errorf("must be a non-negative number of seconds")
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("must be seconds (60) or a duration (90s)")
	}
	return d, nil
}

// Validate reports the first invalid field as a *FieldError.
func (c Config) Validate() error {
	switch {
	case c.LeaseTTL < time.Millisecond || c.LeaseTTL > 24*time.Hour:
		return invalid("LeaseTTL", c.LeaseTTL, "must be between 1ms and 24h")
	case c.MaxRetries < 0 || c.MaxRetries > 100:
		return invalid("MaxRetries", c.MaxRetries, "must be between 0 and 100")
	case c.DefaultSlotTimeout < 0:
		return invalid("DefaultSlotTimeout", c.DefaultSlotTimeout, "must not be negative")
	case c.OpTimeout < 0:
		return invalid("OpTimeout", c.OpTimeout, "must not be negative (0 disables it)")
	case c.PollInterval < time.Millisecond:
		return invalid("PollInterval", c.PollInterval, "must be at least 1ms")
	case c.FailurePolicy > FailOpen:
		return invalid("FailurePolicy", c.FailurePolicy, "must be FailClosed or FailOpen")
	case len(c.Caller) > 200:
		return invalid("Caller", c.Caller, "must be at most 200 bytes")
	}
	return nil
}
