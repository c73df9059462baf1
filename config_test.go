package sluice_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/ontopix/sluice"
)

func TestConfigFromLookup(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		check   func(sluice.Config) bool
		wantErr string // the variable the error must name
	}{
		{"defaults", nil, func(c sluice.Config) bool {
			return c.LeaseTTL == time.Minute && c.MaxRetries == 3 && c.Store == "memory://" &&
				c.FailurePolicy == sluice.FailClosed && c.DefaultSlotTimeout == 30*time.Second
		}, ""},
		{"seconds as the SDKs write them", map[string]string{"SLUICE_LEASE_TTL": "90"}, func(c sluice.Config) bool { return c.LeaseTTL == 90*time.Second }, ""},
		{"fractional seconds", map[string]string{"SLUICE_DEFAULT_SLOT_TIMEOUT": "1.5"}, func(c sluice.Config) bool { return c.DefaultSlotTimeout == 1500*time.Millisecond }, ""},
		{"go duration", map[string]string{"SLUICE_LEASE_TTL": "2m"}, func(c sluice.Config) bool { return c.LeaseTTL == 2*time.Minute }, ""},
		{"table, region, endpoint", map[string]string{
			"SLUICE_TABLE_NAME": "ontopix-vendor-buckets-sandbox", "SLUICE_AWS_REGION": "eu-west-1",
			"SLUICE_ENDPOINT_URL": "http://localhost:4566",
		}, func(c sluice.Config) bool {
			return c.TableName == "ontopix-vendor-buckets-sandbox" && c.AWSRegion == "eu-west-1" && c.EndpointURL == "http://localhost:4566"
		}, ""},
		{"log level and policy", map[string]string{"SLUICE_LOG_LEVEL": "debug", "SLUICE_FAILURE_POLICY": "open", "SLUICE_MAX_RETRIES": "5"},
			func(c sluice.Config) bool {
				return c.LogLevel == slog.LevelDebug && c.FailurePolicy == sluice.FailOpen && c.MaxRetries == 5
			}, ""},
		{"bad ttl", map[string]string{"SLUICE_LEASE_TTL": "soon"}, nil, "SLUICE_LEASE_TTL"},
		{"negative ttl", map[string]string{"SLUICE_LEASE_TTL": "-5"}, nil, "SLUICE_LEASE_TTL"},
		{"zero ttl", map[string]string{"SLUICE_LEASE_TTL": "0"}, nil, "SLUICE_LEASE_TTL"}, // the variable, not the Go field
		{"bad retries", map[string]string{"SLUICE_MAX_RETRIES": "three"}, nil, "SLUICE_MAX_RETRIES"},
		{"bad level", map[string]string{"SLUICE_LOG_LEVEL": "loud"}, nil, "SLUICE_LOG_LEVEL"},
		{"bad policy", map[string]string{"SLUICE_FAILURE_POLICY": "maybe"}, nil, "SLUICE_FAILURE_POLICY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := sluice.ConfigFromLookup(func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			if tt.wantErr != "" {
				var fe *sluice.FieldError
				if !errors.As(err, &fe) || fe.Field != tt.wantErr {
					t.Fatalf("error = %v, want a FieldError naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(c) {
				t.Errorf("config = %+v", c)
			}
		})
	}
}
