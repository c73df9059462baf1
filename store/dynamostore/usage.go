package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/ontopix/sluice/store"
)

// Usage history (store.Usager) lives in a table of its own, the usage
// table (by default the store's table name plus UsageTableSuffix; see
// WithUsageTable and CreateUsageTable), not in the store's table: that
// one has no sort key, and ListBuckets, Leases and Reconcile Scan it,
// paying for every item read, so a day of usage rows there would make
// every Scan dearer.
//
// The usage table has the partition key usage_key (S), the row's period
// and dimension ("m:openai#rpm" for minute rows, "h:openai#rpm" for hour
// rows), and the sort key start_key (S), the row's Start in Unix ms,
// zero-padded to 16 digits, then the caller's length, the caller and the
// writer ("0001767225660000:5:alicewriter-uuid"), so that a read is one
// Query on a partition with a sort-key range on start. An item holds
// counters (M of N), updated_ms and expires_ms (N, Unix ms) and ttl (N,
// Unix seconds, rounded up), the TTL attribute DynamoDB's TTL process
// deletes expired items by. A put is a PutItem per row, each replacing its
// item whole unless the stored item's updated_ms is later, so a resent
// put leaves what one put left and a late one leaves what the later one
// left.
// Reads leave out items past expires_ms, which DynamoDB's TTL process
// deletes only within a day or two (and DynamoDB Local perhaps never).

// UsageTableSuffix is appended to the store's table name to name its
// usage table unless WithUsageTable says otherwise.
const UsageTableSuffix = "-usage"

// Attributes of the usage table.
const (
	attrUsagePK      = "usage_key"
	attrUsageSK      = "start_key"
	attrUsageCounter = "counters"
	attrUsageUpdated = "updated_ms"
	attrUsageExpires = "expires_ms"
)

var _ store.Usager = (*Store)(nil)

// WithUsageTable sets the table holding usage history (store.Usager),
// by default the store's table name plus UsageTableSuffix. Create it with
// CreateUsageTable.
func WithUsageTable(table string) Option { return func(s *Store) { s.usageTable = table } }

// UsageTable returns the name of the store's usage table.
func (s *Store) UsageTable() string {
	if s.usageTable != "" {
		return s.usageTable
	}
	return s.table + UsageTableSuffix
}

// CreateUsageTable creates a usage table: partition key usage_key (S),
// sort key start_key (S), on-demand billing, TTL enabled on ttl. It waits
// until the table is ACTIVE. A table that already exists is not an error;
// its TTL setting is still ensured.
func CreateUsageTable(ctx context.Context, db *dynamodb.Client, table string) error {
	return ensureTable(ctx, db, &dynamodb.CreateTableInput{
		TableName: aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrUsagePK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrUsageSK), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrUsagePK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrUsageSK), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	}, "usage table", true)
}

// usagePK is the partition key of a dimension's rows of period p.
func usagePK(dim string, p time.Duration) string {
	if p == time.Hour {
		return "h:" + dim
	}
	return "m:" + dim
}

// usageStart is the sort key's prefix for a start in Unix ms.
func usageStart(ms int64) string { return fmt.Sprintf("%016d", ms) }

// usageSK is a row's sort key.
func usageSK(start int64, caller, writer string) string {
	return usageStart(start) + ":" + strconv.Itoa(len(caller)) + ":" + caller + writer
}

// parseUsageSK splits a sort key written by usageSK.
func parseUsageSK(sk string) (start int64, caller, writer string, err error) {
	a, rest, ok := strings.Cut(sk, ":")
	b, rest2, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 {
		return 0, "", "", fmt.Errorf("malformed usage sort key %q", sk)
	}
	start, err1 := strconv.ParseInt(a, 10, 64)
	n, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || n < 0 || n > len(rest2) {
		return 0, "", "", fmt.Errorf("malformed usage sort key %q", sk)
	}
	return start, rest2[:n], rest2[n:], nil
}

// usageMissing turns a missing usage table into an error that says how to
// create it, and matches errors.ErrUnsupported: the store keeps no usage
// history until it exists.
func (s *Store) usageMissing(op string, err error) error {
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return fmt.Errorf("dynamostore: %s: the usage table %q does not exist: create it with dynamostore.CreateUsageTable (%w): %w",
			op, s.UsageTable(), errors.ErrUnsupported, err)
	}
	return classify(op, err)
}

// PutUsage implements store.Usager with one conditional PutItem per row,
// usageWriters at a time: a row replaces the stored one unless that was
// updated later (BatchWriteItem takes no condition, so it could roll a
// row back to a late put's totals). Rows already past their retention (by
// this process's clock) are skipped. Without a usage table it fails with
// an error matching errors.ErrUnsupported.
func (s *Store) PutUsage(ctx context.Context, rows []store.UsageRow, retention store.UsageRetention) error {
	if err := store.ValidateUsage(rows, retention); err != nil {
		return err
	}
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return err
	}
	now := time.Now()
	type key struct{ pk, sk string }
	idx := map[key]int{} // a row sent twice in one put: the later Updated wins
	var items []map[string]types.AttributeValue
	var updated []int64
	for _, r := range rows {
		exp := r.Expires(retention)
		if !exp.After(now) {
			continue
		}
		k := key{usagePK(r.Dimension, r.Period), usageSK(r.Start.UnixMilli(), r.Caller, r.Writer)}
		counters := make(map[string]types.AttributeValue, len(r.Counters))
		for name, v := range r.Counters {
			counters[name] = numInt(v)
		}
		expMs, upd := exp.UnixMilli(), r.Updated.UnixMilli()
		item := map[string]types.AttributeValue{
			attrUsagePK: str(k.pk), attrUsageSK: str(k.sk),
			attrUsageCounter: &types.AttributeValueMemberM{Value: counters},
			attrUsageUpdated: numInt(upd),
			attrUsageExpires: numInt(expMs), attrTTL: numInt((expMs + 999) / 1000),
		}
		if i, ok := idx[k]; ok {
			if upd >= updated[i] {
				items[i], updated[i] = item, upd
			}
			continue
		}
		idx[k] = len(items)
		items, updated = append(items, item), append(updated, upd)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(usageWriters)
	for i, item := range items {
		g.Go(func() error { return s.putUsageRow(gctx, item, updated[i]) })
	}
	return g.Wait()
}

// usageWriters is how many rows one PutUsage writes at a time.
const usageWriters = 8

// putUsageRow writes one row unless the stored one was updated after
// updated; a failed condition is that late put, not an error.
func (s *Store) putUsageRow(ctx context.Context, item map[string]types.AttributeValue, updated int64) error {
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.UsageTable()),
		Item:                      item,
		ConditionExpression:       aws.String("attribute_not_exists(#u) OR #u <= :u"),
		ExpressionAttributeNames:  map[string]string{"#u": attrUsageUpdated},
		ExpressionAttributeValues: map[string]types.AttributeValue{":u": numInt(updated)},
	}, opts)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil
	}
	if err != nil {
		return s.usageMissing("put usage", err)
	}
	return nil
}

// ListUsage implements store.Usager with one paginated, consistent Query:
// the dimension and period's partition, start_key from From to To.
// Without a usage table it fails with an error matching
// errors.ErrUnsupported.
func (s *Store) ListUsage(ctx context.Context, q store.UsageQuery) ([]store.UsageRow, error) {
	if err := store.ValidateUsageQuery(q); err != nil {
		return nil, err
	}
	ctx, cancel, err := s.begin(ctx)
	defer cancel()
	if err != nil {
		return nil, err
	}
	if !q.From.Before(q.To) {
		return nil, nil
	}
	// A row's sort key starts with its padded Start, followed by ':': the
	// padded To itself sorts before every row starting at To.
	in := &dynamodb.QueryInput{
		TableName:                aws.String(s.UsageTable()),
		ConsistentRead:           aws.Bool(true),
		KeyConditionExpression:   aws.String("#pk = :pk AND #sk BETWEEN :lo AND :hi"),
		FilterExpression:         aws.String("#x > :now"),
		ExpressionAttributeNames: map[string]string{"#pk": attrUsagePK, "#sk": attrUsageSK, "#x": attrUsageExpires},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": str(usagePK(q.Dimension, q.Period)), ":lo": str(usageStart(q.From.UnixMilli())),
			":hi": str(usageStart(q.To.UnixMilli())), ":now": numInt(time.Now().UnixMilli()),
		},
	}
	var out []store.UsageRow
	p := dynamodb.NewQueryPaginator(s.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx, opts)
		if err != nil {
			return nil, s.usageMissing("list usage", err)
		}
		for _, item := range page.Items {
			r, err := decodeUsage(item, q)
			if err != nil {
				return nil, fmt.Errorf("dynamostore: list usage: %w", err)
			}
			if store.UsageInRange(q, r.Start) {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// decodeUsage reads a usage item.
func decodeUsage(item map[string]types.AttributeValue, q store.UsageQuery) (store.UsageRow, error) {
	sk, _ := getS(item, attrUsageSK)
	start, caller, writer, err := parseUsageSK(sk)
	if err != nil {
		return store.UsageRow{}, err
	}
	r := store.UsageRow{Dimension: q.Dimension, Caller: caller, Period: q.Period, Start: time.UnixMilli(start).UTC(), Writer: writer}
	if m, ok := item[attrUsageCounter].(*types.AttributeValueMemberM); ok && len(m.Value) > 0 {
		r.Counters = make(map[string]int64, len(m.Value))
		for name, v := range m.Value {
			n, ok := v.(*types.AttributeValueMemberN)
			if !ok {
				return store.UsageRow{}, fmt.Errorf("item %q: counter %q is not a number", sk, name)
			}
			x, err := strconv.ParseInt(n.Value, 10, 64)
			if err != nil {
				return store.UsageRow{}, fmt.Errorf("item %q: counter %q = %s is not an integer", sk, name, n.Value)
			}
			r.Counters[name] = x
		}
	}
	if u, ok := item[attrUsageUpdated].(*types.AttributeValueMemberN); ok {
		ms, err := strconv.ParseInt(u.Value, 10, 64)
		if err != nil {
			return store.UsageRow{}, fmt.Errorf("item %q: updated_ms %q is not an integer", sk, u.Value)
		}
		r.Updated = time.UnixMilli(ms).UTC()
	}
	return r, nil
}
