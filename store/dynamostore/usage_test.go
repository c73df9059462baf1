package dynamostore

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/storetest"
)

// createUsageTable creates s's usage table, deleted with tb.
func createUsageTable(tb testing.TB, s *Store) {
	tb.Helper()
	if err := CreateUsageTable(context.Background(), s.db, s.UsageTable()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_, _ = server.Client().DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(s.UsageTable())})
	})
}

// TestUsageItems checks the usage items' keys and their TTL attribute,
// that an item past its expiry which DynamoDB has not deleted yet is not
// listed, and that a store without its usage table says so with an error
// matching errors.ErrUnsupported.
func TestUsageItems(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	row := store.UsageRow{Dimension: "openai#rpm", Caller: "alice", Period: time.Minute,
		Start: time.Now().UTC().Truncate(time.Minute).Add(-time.Hour), Writer: "w1", Counters: map[string]int64{"grants": 3}, Updated: time.Now()}
	err := s.PutUsage(ctx, []store.UsageRow{row}, store.UsageRetention{})
	if !errors.Is(err, errors.ErrUnsupported) || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("PutUsage without a usage table: %v, want an error matching errors.ErrUnsupported", err)
	}
	if _, err := s.ListUsage(ctx, store.UsageQuery{Dimension: "openai#rpm", Period: time.Minute, From: row.Start, To: time.Now()}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("ListUsage without a usage table: %v, want an error matching errors.ErrUnsupported", err)
	}
	createUsageTable(t, s)
	ret := store.UsageRetention{Minute: 5 * time.Hour}
	if err := s.PutUsage(ctx, []store.UsageRow{row}, ret); err != nil {
		t.Fatal(err)
	}
	start := row.Start.UnixMilli()
	sk := usageSK(start, "alice", "w1")
	if want := strconv.FormatInt(start, 10); len(sk) < 16 || sk[16:] != ":5:alicew1" || sk[16-len(want):16] != want {
		t.Errorf("sort key %q, want the padded start then :5:alicew1", sk)
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.UsageTable()), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{attrUsagePK: str("m:openai#rpm"), attrUsageSK: str(sk)}})
	if err != nil || out.Item == nil {
		t.Fatalf("GetItem: %v, %v", out, err)
	}
	exp := row.Start.Add(time.Minute + 5*time.Hour)
	if got, want := out.Item[attrTTL], numInt(exp.Unix()); !equalN(got, want) {
		t.Errorf("ttl = %v, want %v (Start + Period + retention, in seconds)", got, want)
	}
	if got, want := out.Item[attrUsageExpires], numInt(exp.UnixMilli()); !equalN(got, want) {
		t.Errorf("expires_ms = %v, want %v", got, want)
	}

	// An item past its expiry, which DynamoDB's TTL process has not
	// deleted yet, is left out.
	past := out.Item
	past[attrUsageSK] = str(usageSK(start, "bob", "w1"))
	past[attrUsageExpires] = numInt(time.Now().Add(-time.Minute).UnixMilli())
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.UsageTable()), Item: past}); err != nil {
		t.Fatal(err)
	}
	rows, err := s.ListUsage(ctx, store.UsageQuery{Dimension: "openai#rpm", Period: time.Minute, From: row.Start, To: row.Start.Add(time.Minute)})
	if err != nil || len(rows) != 1 || rows[0].Caller != "alice" {
		t.Errorf("ListUsage = %+v, %v; want alice's row alone", rows, err)
	}
}

func equalN(a, b types.AttributeValue) bool {
	x, ok1 := a.(*types.AttributeValueMemberN)
	y, ok2 := b.(*types.AttributeValueMemberN)
	return ok1 && ok2 && x.Value == y.Value
}

// BenchmarkConformance runs the suite's benchmarks against DynamoDB Local,
// the usage-history ones included.
func BenchmarkConformance(b *testing.B) {
	storetest.RunBenchmarks(b, storetest.Harness{
		NewStore:     func(tb testing.TB) store.Store { return newStore(tb) },
		PrepareUsage: prepareUsage,
	})
}
