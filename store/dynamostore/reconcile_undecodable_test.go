package dynamostore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// TestReconcileSurvivesAnUndecodableBucket: one expired lease item (as
// the Python and TypeScript SDKs write it) on a bucket row Sluice cannot
// decode (here an SDK's requests bucket with refill_rate 0) does not stop
// the reconciler from reclaiming every other expired lease: the lease is
// removed with nothing restored into that row, as for a missing one.
// Before, its removal returned the row's decoding error, which aborted
// every pass.
func TestReconcileSurvivesAnUndecodableBucket(t *testing.T) {
	ctx := context.Background()
	db := newClient()
	table := newTable(t, db)
	s := openStore(t, db, table)
	goods := []string{"g1#concurrent", "g2#concurrent", "g3#concurrent", "g4#concurrent", "g5#concurrent", "g6#concurrent"}
	for _, g := range goods {
		put(t, s, t0, store.Bucket{Name: g, Config: bucket.ConcurrentSlots(2)})
		var res store.AcquireResult
		if err := s.Acquire(ctx, &store.AcquireRequest{Now: t0, Items: []store.Item{{Dimension: g}}, ID: store.NewLeaseID(), TTL: time.Minute}, &res); err != nil || !res.Granted {
			t.Fatalf("acquire %s = %+v, %v", g, res, err)
		}
	}
	// A bucket row and an expired lease item in the SDKs' format.
	const bad = "bad#rpm"
	secs := func(tm time.Time) types.AttributeValue { return num(formatSeconds(tm.UnixMilli())) }
	for _, item := range []map[string]types.AttributeValue{
		{attrPK: str(bad), attrCapacity: num("10"), attrTokens: num("10"), attrRate: num("0"),
			attrLast: secs(t0), attrCost: num("1"), attrType: str("requests"), attrVersion: num("1")},
		{attrPK: str("lease#" + bad + "#sdk-lease-1"), attrDimension: str(bad), attrLeaseCost: num("1"),
			attrCreated: secs(t0), attrTTL: numInt(t0.Add(time.Minute).Unix()), attrCaller: str("python-sdk")},
	} {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	later := t0.Add(10 * time.Minute)
	var errs []error
	for pass := 0; pass < 3; pass++ {
		if _, err := s.Reconcile(ctx, store.ReconcileRequest{Now: later, Limit: 1000}); err != nil {
			errs = append(errs, err)
		}
	}
	missed := 0
	for _, g := range goods {
		st, err := s.Peek(ctx, store.PeekRequest{Now: later, Dimensions: []string{g}})
		if err != nil {
			t.Fatal(err)
		}
		if st[0].Tokens != 2*bucket.Milli || st[0].ActiveLeases != 0 {
			missed++
		}
	}
	for i, err := range errs {
		t.Errorf("reconcile pass error %d: %v (unavailable: %v)", i+1, err, errors.Is(err, store.ErrUnavailable))
	}
	if missed > 0 {
		t.Errorf("%d expired concurrent leases on healthy buckets were never reclaimed", missed)
	}
}
