package fleetsim

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/ontopix/sluice/internal/testing/ddbtest"
	"github.com/ontopix/sluice/internal/testing/pgtest"
	"github.com/ontopix/sluice/internal/testing/redistest"
	"github.com/ontopix/sluice/internal/testing/testproc"
)

// long runs the scenarios longer, with deeper queues (-fleet.long or
// SLUICE_FLEET_LONG=1).
var long = flag.Bool("fleet.long", os.Getenv("SLUICE_FLEET_LONG") == "1", "run the fleet scenarios longer, with deeper queues")

// openRuns runs the scenarios whose targets are not met yet (-fleet.open or
// SLUICE_FLEET_OPEN=1); docs/reliability.md lists them with their figures.
var openRuns = flag.Bool("fleet.open", os.Getenv("SLUICE_FLEET_OPEN") == "1", "also run the scenarios whose targets are not met yet")

// openScenario skips t unless open scenarios were asked for. Each one
// names the target it misses; they run, and fail, with -fleet.open.
func openScenario(t *testing.T, missed string) {
	t.Helper()
	if !*openRuns {
		t.Skipf("open: %s (run with -fleet.open or SLUICE_FLEET_OPEN=1)", missed)
	}
}

// The real stores every scenario of this binary shares; started by TestMain.
var (
	redisServer *redistest.Server
	ddbServer   *ddbtest.Server
)

// useTarget returns the use target of a scenario on a store of kind: 95 %,
// or, on a store that open names unless open scenarios were asked for,
// none (the excess is checked all the same), with the reason open gives
// logged.
func useTarget(t *testing.T, kind string, open map[string]string) float64 {
	t.Helper()
	if missed, ok := open[kind]; ok && !*openRuns {
		t.Logf("use target open on %s: %s (run with -fleet.open or SLUICE_FLEET_OPEN=1)", kind, missed)
		return 0
	}
	return 0.95
}

func TestMain(m *testing.M) {
	flag.Parse()
	if testproc.SkipPackage("redis-server, PostgreSQL and DynamoDB Local") {
		os.Exit(0)
	}
	var err error
	if redisServer, err = redistest.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: redis-server is required for these tests:", err)
		os.Exit(1)
	}
	if ddbServer, err = ddbtest.Start(); err != nil {
		redisServer.Close()
		fmt.Fprintln(os.Stderr, "FAIL: DynamoDB Local is required for these tests:", err)
		os.Exit(1)
	}
	if err := warmDynamoDB(context.Background()); err != nil {
		redisServer.Close()
		ddbServer.Close()
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	code := pgtest.Main(m)
	redisServer.Close()
	ddbServer.Close()
	os.Exit(code)
}
