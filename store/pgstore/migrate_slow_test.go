package pgstore

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/ontopix/sluice/internal/testing/faultproxy"
	"github.com/ontopix/sluice/internal/testing/pgtest"
)

// TestMigrateOverASlowLink migrates a fresh schema through a link that
// adds 30 ms to every answer, as a server in another region does: a fresh
// migration is about a hundred round trips, which must not be held to one
// operation's timeout (2 s) as a whole — each statement is — or a store
// opened with migrate=true there never gets past its first start.
func TestMigrateOverASlowLink(t *testing.T) {
	pgtest.SkipShort(t)
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.New(u.Host, func(_ int, dir faultproxy.Dir, _ []byte) faultproxy.Verdict {
		if dir == faultproxy.ToClient {
			return faultproxy.Verdict{Delay: 30 * time.Millisecond}
		}
		return faultproxy.Verdict{}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	u.Host = p.Addr()
	s, err := New(pgtest.PoolAt(t, u.String(), nil), WithSchema(pgtest.Schema()), WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate over a 30 ms link: %v (after %s)", err, time.Since(start).Round(time.Millisecond))
	}
	t.Logf("migrated in %s", time.Since(start).Round(time.Millisecond))
}
