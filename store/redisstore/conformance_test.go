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

// TestConformanceCluster runs the suite against a real 3-master Cluster
// with every key under one hash tag (WithHashTag), where acquisitions may
// mix vendors as on a standalone server.
func TestConformanceCluster(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewStore:   func(tb testing.TB) store.Store { return newStoreOn(tb, newClusterClient(tb), WithHashTag("sluice")) },
		Goroutines: 32,
	})
}

// TestConformanceClusterPerVendor runs the suite against the real Cluster
// with the default key layout, one slot per vendor: the store rejects
// cross-vendor acquisitions (ErrCrossSlot, an ErrInvalid), so the suite
// acquires several dimensions at once only within one vendor and checks the
// rejection.
func TestConformanceClusterPerVendor(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewStore:            func(tb testing.TB) store.Store { return newStoreOn(tb, newClusterClient(tb)) },
		Goroutines:          32,
		SingleVendorAcquire: true,
	})
}

// TestConformanceUnbatched runs the suite on a standalone server with
// batching off (WithBatching(1)); the tests above run with the default
// batching.
func TestConformanceUnbatched(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewStore:   func(tb testing.TB) store.Store { return newStore(tb, WithBatching(1)) },
		Goroutines: 32,
	})
}

// TestConformanceClusterUnbatched runs the suite on the real Cluster, one
// slot per vendor, with batching off.
func TestConformanceClusterUnbatched(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewStore:            func(tb testing.TB) store.Store { return newStoreOn(tb, newClusterClient(tb), WithBatching(1)) },
		Goroutines:          32,
		SingleVendorAcquire: true,
	})
}
