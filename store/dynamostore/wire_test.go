package dynamostore

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// seedBucket and seedLease are the JSON examples of the SDKs' table format, attribute for
// attribute, as the Python and TypeScript SDKs write them.
func seedBucket() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"vendor_dimension": str("openai#rpm"),
		"capacity":         num("100"),
		"tokens":           num("47"),
		"refill_rate":      num("1.667"),
		"last_refill_at":   num("1709550002"),
		"cost_per_call":    num("1"),
		"limit_type":       str("requests"),
		"version":          num("42"),
	}
}

func seedLease() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"vendor_dimension": str("lease#openai#rpm#a3f8c910"),
		"dimension":        str("openai#rpm"),
		"cost":             num("1"),
		"created_at":       num("1709550100"),
		"ttl":              num("1709550160"),
		"caller":           str("audit-service"),
	}
}

func rawGet(t *testing.T, db *dynamodb.Client, table, pk string) map[string]types.AttributeValue {
	t.Helper()
	r, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(pk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return r.Item
}

func wantN(t *testing.T, item map[string]types.AttributeValue, attr, want string) {
	t.Helper()
	// DynamoDB Local keeps the written digits, real DynamoDB normalises
	// them ("47.000" → "47"): compare the values, exactly.
	got, ok := getN(item, attr)
	g, err1 := parseMilli(got)
	w, err2 := parseMilli(want)
	if !ok || err1 != nil || err2 != nil || g != w {
		t.Errorf("%s = %q (present %t), want N %q", attr, got, ok, want)
	}
}

// TestSeedWireFormat reads rows in the exact shape of the SDKs' table format examples,
// acquires against them, and checks what it writes back is what the SDKs'
// SDKs read: their attributes untouched except tokens, last_refill_at and
// version, with three-decimal tokens and millisecond-decimal seconds.
func TestSeedWireFormat(t *testing.T) {
	ctx := context.Background()
	db := newClient()
	table := newTable(t, db)
	for _, it := range []map[string]types.AttributeValue{seedBucket(), seedLease()} {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	s := openStore(t, db, table)
	last := time.Unix(1709550002, 0)
	// 100 tokens at 1.667/s: the period is ceil(100/1.667 s) = 59989 ms.
	st, err := s.Peek(ctx, store.PeekRequest{Now: last, Dimensions: []string{"openai#rpm"}})
	if err != nil {
		t.Fatal(err)
	}
	wantCfg := bucket.Config{Type: bucket.Requests, Capacity: 100, RefillAmount: 100, RefillPeriod: 59989 * time.Millisecond}
	if st[0].Config != wantCfg || st[0].Tokens != 47_000 || st[0].LastRefill != last.UnixMilli() {
		t.Fatalf("Peek = %+v, want %+v with 47000 millitokens at %d", st[0], wantCfg, last.UnixMilli())
	}
	now := last.Add(250 * time.Millisecond)
	res := acquireOnce(t, s, now, false, store.Item{Dimension: "openai#rpm", Cost: 1})
	// 250 ms at 100/59989 ms earns 416 millitokens (used ceil(416*59989/100000) = 250 ms).
	if res.Items[0].Remaining != 47_000+416-1000 {
		t.Errorf("Remaining = %d, want %d", res.Items[0].Remaining, 47_000+416-1000)
	}
	row := rawGet(t, db, table, "openai#rpm")
	wantN(t, row, "tokens", "46.416")
	wantN(t, row, "last_refill_at", "1709550002.25")
	wantN(t, row, "version", "43")
	wantN(t, row, "capacity", "100")
	wantN(t, row, "refill_rate", "1.667")
	wantN(t, row, "cost_per_call", "1")
	if v, _ := getS(row, "limit_type"); v != "requests" {
		t.Errorf("limit_type = %q", v)
	}

	// An SDK-written lease, long expired: reconcile deletes it and
	// restores nothing (a requests bucket refills by itself).
	rec, err := s.Reconcile(ctx, store.ReconcileRequest{Now: time.Unix(1709550161, 0), Limit: store.DefaultReconcileLimit})
	if err != nil || rec.Restored != 1 || rec.Reclaimed != 0 || len(rec.Dimensions) != 1 {
		t.Errorf("Reconcile = %+v, %v; want 1 restored on openai#rpm", rec, err)
	}
	if rawGet(t, db, table, "lease#openai#rpm#a3f8c910") != nil {
		t.Error("the SDKs' lease record survived reconcile")
	}

	// What Sluice writes: every SDK attribute, in the SDKs' types.
	b := store.Bucket{Name: "openai#tpm", Config: bucket.Config{Type: bucket.Tokens, Capacity: 30000, RefillAmount: 30000, RefillPeriod: time.Minute, CostPerCall: 100}}
	put(t, s, now, b)
	row = rawGet(t, db, table, "openai#tpm")
	for attr, want := range map[string]string{"capacity": "30000", "tokens": "30000", "refill_rate": "500",
		"last_refill_at": "1709550002.25", "cost_per_call": "100", "version": "1", "refill_amount": "30000", "refill_period_ms": "60000"} {
		wantN(t, row, attr, want)
	}
	acquireOnce(t, s, now.Add(time.Millisecond), true, store.Item{Dimension: "openai#tpm", Cost: 1234}, store.Item{Dimension: "openai#rpm"})
	row = rawGet(t, db, table, "openai#tpm")
	wantN(t, row, "tokens", "28766")
	wantN(t, row, "last_refill_at", "1709550002.251")
	ls, err := s.Leases(ctx, store.LeaseQuery{Now: now})
	if err != nil || len(ls) != 1 || len(ls[0].Items) != 2 {
		t.Fatalf("Leases = %+v, %v", ls, err)
	}
	// One lease item per dimension, sharing the uuid, each in the SDKs' shape.
	for _, it := range ls[0].Items {
		lr := rawGet(t, db, table, "lease#"+it.Dimension+"#"+ls[0].ID.String())
		if d, _ := getS(lr, "dimension"); d != it.Dimension {
			t.Errorf("lease item for %s: dimension %q", it.Dimension, d)
		}
		wantN(t, lr, "ttl", "1709550063")
		wantN(t, lr, "created_at", "1709550002.251")
		if c, _ := getS(lr, "caller"); c != "test" {
			t.Errorf("caller = %q", c)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tt := range []struct {
		m    int64
		want string
	}{{47125, "47.125"}, {-1500, "-1.500"}, {0, "0.000"}, {5, "0.005"}, {-5, "-0.005"}} {
		if got := formatMilli(tt.m); got != tt.want {
			t.Errorf("formatMilli(%d) = %q, want %q", tt.m, got, tt.want)
		}
		if back, err := parseMilli(tt.want); err != nil || back != tt.m {
			t.Errorf("parseMilli(%q) = %d, %v", tt.want, back, err)
		}
	}
	if got := formatSeconds(1709550002250); got != "1709550002.250" {
		t.Errorf("formatSeconds = %q", got)
	}
	if got, _ := parseMilli("46.98333333"); got != 46983 {
		t.Errorf("parseMilli rounds down: got %d", got)
	}
	if got, _ := parseMilliCeil("1709550002.0001"); got != 1709550002001 {
		t.Errorf("parseMilliCeil rounds up: got %d", got)
	}
	for _, tt := range []struct {
		cap            int64
		rate           string
		amount, period int64
	}{{100, "1.667", 100, 59989}, {60, "1", 60, 60000}, {10, "0", 0, 0}, {1, "0.000000001", 1, bucket.MaxPeriodMs}} {
		a, p, err := deriveRefill(tt.cap, tt.rate)
		if err != nil || a != tt.amount || p != tt.period {
			t.Errorf("deriveRefill(%d, %s) = %d/%d ms, %v; want %d/%d ms", tt.cap, tt.rate, a, p, err, tt.amount, tt.period)
		}
	}
}
