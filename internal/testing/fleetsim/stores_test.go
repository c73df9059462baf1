package fleetsim

import (
	"context"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/testing/ddbtest"
	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/dynamostore"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/store/pgstore"
	"github.com/ontopix/sluice/store/redisstore"
	"github.com/ontopix/sluice/store/remotestore"
)

// The stores every scenario runs on: the four stores, and "remote",
// store/remotestore through sluice serve's store door to Redis, unless
// SLUICE_FLEET_DOOR=0.
var stores = storeKinds()

// doorStores are the stores of the scenarios that break the clock and
// reply assumptions (skewed clocks, lost and resent replies, concurrent
// creates): they always run through the store door as well, whose own
// HTTP retries are one more way for a reply to be lost or resent.
var doorStores = withDoor(stores)

func storeKinds() []string {
	kinds := []string{"memory", "redis", "postgres", "dynamodb"}
	if os.Getenv("SLUICE_FLEET_DOOR") != "0" {
		kinds = append(kinds, "remote")
	}
	return kinds
}

// withDoor returns kinds with "remote" added if it is not there.
func withDoor(kinds []string) []string {
	if slices.Contains(kinds, "remote") {
		return kinds
	}
	return append(slices.Clip(kinds), "remote")
}

var prefixes atomic.Int64

// opTimeout bounds each store call of the fleet's clients: far above a
// loaded machine's stalls, below the stalls the scenarios inject.
const opTimeout = 5 * time.Second

// fleet is one scenario's fleet on one store.
type fleet struct {
	t       *testing.T
	kind    string
	rec     *Recorder
	admin   *sluice.Client
	members []*Member
	// open returns a store for a member whose connection goes to addr
	// (the proxy's; "" on the memory store).
	open func(addr string) store.Store
	// target is the store's address for the proxies.
	target string
	// opts are client options every member gets, before join's own.
	opts []sluice.Option
	// lenient makes verify log a missed use target, and note it in
	// missedUse, rather than fail the test (see withUse).
	lenient   bool
	missedUse bool
}

// newFleet sets up a store of kind for t, with no members yet.
func newFleet(t *testing.T, kind string) *fleet {
	t.Helper()
	return newFleetOn(t, kind, redisServer.Addr)
}

// newFleetOn is newFleet with the Redis server's address given.
func newFleetOn(t *testing.T, kind, redisAddr string) *fleet {
	t.Helper()
	f := &fleet{t: t, kind: kind, rec: NewRecorder()}
	ctx := context.Background()
	switch kind {
	case "memory":
		ms := memstore.New()
		f.open = func(string) store.Store { return ms }
	case "redis":
		prefix := "fleet" + itoa(prefixes.Add(1)) + ":"
		f.target = redisAddr
		f.open = func(addr string) store.Store {
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			t.Cleanup(func() { rdb.Close() })
			s, err := redisstore.New(rdb, redisstore.WithPrefix(prefix), redisstore.WithCallerClock(), redisstore.WithTimeout(opTimeout))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	case "postgres":
		u, err := url.Parse(pgtest.URL())
		if err != nil {
			t.Fatal(err)
		}
		f.target = u.Host
		schema := pgtest.Schema()
		setup, err := pgstore.New(pgtest.Pool(t, nil), pgstore.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		if err := setup.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		f.open = func(addr string) store.Store {
			v := *u
			v.Host = addr
			pool := pgtest.PoolAt(t, v.String(), func(c *pgxpool.Config) { c.MaxConns = 8 })
			s, err := pgstore.New(pool, pgstore.WithSchema(schema), pgstore.WithCallerClock(), pgstore.WithTimeout(opTimeout))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	case "remote":
		// One service in front of Redis, as a fleet shares one; the proxies
		// sit between the members and the service.
		rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
		t.Cleanup(func() { rdb.Close() })
		backing, err := redisstore.New(rdb, redisstore.WithPrefix("door"+itoa(prefixes.Add(1))+":"), redisstore.WithCallerClock(), redisstore.WithTimeout(opTimeout))
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(remotestore.Handler(backing))
		t.Cleanup(hs.Close)
		f.target = strings.TrimPrefix(hs.URL, "http://")
		f.open = func(addr string) store.Store {
			s, err := remotestore.Open(ctx, "http://"+addr, remotestore.WithTimeout(opTimeout))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	case "dynamodb":
		f.target = strings.TrimPrefix(ddbServer.Endpoint, "http://")
		table := ddbServer.TableName("fleet")
		if err := dynamostore.CreateTable(ctx, ddbServer.Client(dynamostore.ClientOptions), table); err != nil {
			t.Fatal(err)
		}
		f.open = func(addr string) store.Store {
			s, err := dynamostore.New(ddbtest.NewClient("http://"+addr, dynamostore.ClientOptions), table, dynamostore.WithTimeout(opTimeout))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	default:
		t.Fatalf("unknown store %q", kind)
	}
	var err error
	if f.admin, err = sluice.New(f.open(f.target)); err != nil {
		t.Fatal(err)
	}
	return f
}

// join adds a member with clock c and client options.
func (f *fleet) join(c Clock, opts ...sluice.Option) *Member {
	f.t.Helper()
	c.start = f.rec.start
	m := &Member{Clock: &c, rec: f.rec}
	addr := ""
	if f.kind != "memory" {
		p, err := NewProxy(f.target)
		if err != nil {
			f.t.Fatal(err)
		}
		f.t.Cleanup(func() { p.Close() })
		m.Proxy, addr = p, p.Addr
	}
	opts = append(append([]sluice.Option{sluice.WithClock(m.Clock), withOpTimeout(opTimeout)}, f.opts...), opts...)
	cl, err := sluice.New(f.open(addr), opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	m.Client = cl
	f.members = append(f.members, m)
	return m
}

// withOpTimeout configures a client with the default Config but for its
// OpTimeout, d.
func withOpTimeout(d time.Duration) sluice.Option {
	cfg := sluice.DefaultConfig()
	cfg.OpTimeout = d
	return sluice.WithConfig(cfg)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
