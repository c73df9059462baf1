package redisstore

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/storetest"
)

// variantSequences is how many model-based sequences the variants of the
// suite run (other clients, batching, replica ack): the default suite runs
// storetest.DefaultModelSequences; SLUICE_MODEL_SEQUENCES raises both.
const variantSequences = 40

// clusterSequences is the same for the Cluster variants without a hash
// tag, where the registry of vendors keeps every vendor the sequences
// create (no script can prune it across slots), so listings slow down as
// the sequences go on.
const clusterSequences = 20

// sameBackend opens another handle (its own client and connections, as
// another process) on the backend of s, with opts.
func sameBackend(newClient func(testing.TB) redis.UniversalClient, opts ...Option) func(testing.TB, store.Store) store.Store {
	return func(tb testing.TB, s store.Store) store.Store {
		return newStoreOn(tb, newClient(tb), append(opts, WithPrefix(s.(*Store).prefix))...)
	}
}

func standaloneClient(tb testing.TB) redis.UniversalClient { return newClient(tb) }
func clusterClient(tb testing.TB) redis.UniversalClient    { return newClusterClient(tb) }

// TestConformance runs the shared suite and the golden vectors against a
// real standalone redis-server, in caller-clock mode.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewStore:   func(tb testing.TB) store.Store { return newStore(tb) },
		OpenHandle: sameBackend(standaloneClient),
		Goroutines: 32,
	})
}

// TestConformanceCluster runs the suite against a real 3-master Cluster
// with every key under one hash tag (WithHashTag), where acquisitions may
// mix vendors as on a standalone server.
func TestConformanceCluster(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewStore:       func(tb testing.TB) store.Store { return newStoreOn(tb, newClusterClient(tb), WithHashTag("sluice")) },
		OpenHandle:     sameBackend(clusterClient, WithHashTag("sluice")),
		Goroutines:     32,
		ModelSequences: variantSequences,
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
		OpenHandle:          sameBackend(clusterClient),
		Goroutines:          32,
		SingleVendorAcquire: true,
		ModelSequences:      clusterSequences,
	})
}

// TestConformanceUnbatched runs the suite on a standalone server with
// batching off (WithBatching(1)); the tests above run with the default
// batching.
func TestConformanceUnbatched(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewStore:       func(tb testing.TB) store.Store { return newStore(tb, WithBatching(1)) },
		OpenHandle:     sameBackend(standaloneClient, WithBatching(1)),
		Goroutines:     32,
		ModelSequences: variantSequences,
	})
}

// TestConformanceClusterUnbatched runs the suite on the real Cluster, one
// slot per vendor, with batching off.
func TestConformanceClusterUnbatched(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewStore:            func(tb testing.TB) store.Store { return newStoreOn(tb, newClusterClient(tb), WithBatching(1)) },
		OpenHandle:          sameBackend(clusterClient, WithBatching(1)),
		Goroutines:          32,
		SingleVendorAcquire: true,
		ModelSequences:      clusterSequences,
	})
}
