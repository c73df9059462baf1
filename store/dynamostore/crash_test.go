package dynamostore

import (
	"strings"
	"testing"

	"github.com/ontopix/sluice/internal/testing/crashtest"
	"github.com/ontopix/sluice/internal/testing/ddbtest"
	"github.com/ontopix/sluice/store"
)

// crashConfig has a child open a store on the "endpoint table" the test
// passes it.
var crashConfig = crashtest.Config{
	Env:      "SLUICE_DYNAMOSTORE_CRASH_CHILD",
	Children: 4,
	Open: func(addr string) (store.Store, error) {
		f := strings.Fields(addr)
		return New(ddbtest.NewClient(f[0], ClientOptions), f[1])
	},
}

// TestCrashRecovery SIGKILLs child processes holding concurrent slots and
// checks that racing reconcilers restore every abandoned slot exactly once
// (see crashtest.Run).
func TestCrashRecovery(t *testing.T) {
	db := newClient()
	table := newTable(t, db)
	crashtest.Run(t, crashConfig, openStore(t, db, table), server.Endpoint+" "+table)
}
