package remotestore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ontopix/sluice/store/remotestore"
	"github.com/ontopix/sluice/store/storeurl"
)

// TestOpenURLErrors: a malformed sluice:// URL is a configuration error
// naming what is wrong, never an outage; a token never goes in the URL.
func TestOpenURLErrors(t *testing.T) {
	openers := storeurl.Openers{remotestore.URLOpener()}
	tests := []struct{ url, want string }{
		{"sluice://", "takes host:port"},
		{"sluice://127.0.0.1:1/x", "takes host:port and no path"},
		{"sluice://127.0.0.1:1?timeout=x", `timeout="x"`},
		{"sluice://127.0.0.1:1?timeout=-1s", `timeout="-1s"`},
		{"sluice://127.0.0.1:1?foo=1", `unknown option "foo"`},
		{"sluice://u:secret@127.0.0.1:1", "SLUICE_TOKEN"},
	}
	for _, tt := range tests {
		_, err := openers.Open(context.Background(), tt.url)
		if !errors.Is(err, storeurl.ErrBadURL) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want a bad URL naming %q", tt.url, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error prints the secret: %v", tt.url, err)
		}
	}
}
