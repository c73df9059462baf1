package clistore

import (
	"testing"
	"time"

	"github.com/ontopix/sluice/internal/cmd/clikit"
)

func TestURLTimeoutBoundsTheClient(t *testing.T) {
	env := func(vars map[string]string) clikit.Env {
		return clikit.Env{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	}
	tests := []struct {
		name   string
		store  string
		vars   map[string]string
		want   time.Duration
		wantOK bool
	}{
		{"timeout in the URL", "redis://127.0.0.1:6379/0?timeout=300ms", nil, 300 * time.Millisecond, true},
		{"no timeout in the URL", "redis://127.0.0.1:6379/0", nil, 0, false},
		{"SLUICE_OP_TIMEOUT wins", "redis://127.0.0.1:6379/0?timeout=300ms", map[string]string{"SLUICE_OP_TIMEOUT": "1s"}, 0, false},
		{"zero: none", "postgres://u@127.0.0.1/db?timeout=0", nil, 0, true},
		{"not a duration: left to the store URL's check", "redis://127.0.0.1:6379/0?timeout=soon", nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &Globals{Env: env(tt.vars), Store: tt.store}
			got, ok := g.urlTimeout()
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("urlTimeout() = %v, %t; want %v, %t", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
