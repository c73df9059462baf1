package redisstore

import (
	"testing"

	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/storetest"
)

// TestConformance runs the shared suite and the golden vectors against a
// real standalone redis-server, in caller-clock mode.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewStore:   func(tb testing.TB) store.Store { return newStore(tb) },
		Goroutines: 32,
	})
}

// TestConformanceCluster runs the suite against a real 3-master Cluster.
// The suite mixes vendors in one acquisition, so the store puts every key
// under one hash tag (WithHashTag); TestClusterSlots covers per-vendor slots.
func TestConformanceCluster(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewStore:   func(tb testing.TB) store.Store { return newStoreOn(tb, newClusterClient(tb), WithHashTag("sluice")) },
		Goroutines: 32,
	})
}
