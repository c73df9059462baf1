package redisstore

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/internal/testing/crashtest"
	"github.com/ontopix/sluice/store"
)

// crashConfig has a child open a caller-clock store on the "addr prefix"
// the test passes it.
var crashConfig = crashtest.Config{
	Env:      "SLUICE_REDISSTORE_CRASH_CHILD",
	Children: 5,
	Open: func(addr string) (store.Store, error) {
		f := strings.Fields(addr)
		return New(redis.NewClient(&redis.Options{Addr: f[0]}), WithPrefix(f[1]), WithCallerClock())
	},
}

// TestCrashRecovery SIGKILLs child processes holding concurrent slots and
// checks that racing reconcilers restore every abandoned slot exactly once
// (see crashtest.Run).
func TestCrashRecovery(t *testing.T) {
	s := newStore(t)
	crashtest.Run(t, crashConfig, s, standalone.Addr+" "+s.prefix)
}
