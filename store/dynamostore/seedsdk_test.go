package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// seedSDK re-implements, write for write, the Python and TypeScript
// SDKs and their reconciler on the shared table, so that
// Sluice can be raced against the other SDKs of a mixed fleet. Numbers are
// floats, as those SDKs write them.
type seedSDK struct {
	db    *dynamodb.Client
	table string
}

// sdkLease is a lease the SDKs holds.
type sdkLease struct {
	dim  string
	pk   string
	cost float64
}

// acquire is the SDKs' acquisition of cost on dim at now (Unix seconds):
// consistent GetItem, refill, no write when short, then a transaction
// conditioned on version = :expected that writes the absolute balance and
// the lease item; a lost race retries after 25–200 ms with jitter, up to
// retries times. It returns nil, nil when denied or out of retries.
func (c *seedSDK) acquire(ctx context.Context, dim string, cost, now float64, ttl float64, retries int) (*sdkLease, error) {
	for attempt := 0; attempt <= retries; attempt++ {
		if attempt > 0 {
			time.Sleep(time.Duration(25+rand.IntN(175)) * time.Millisecond)
		}
		r, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(c.table), Key: key(dim), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil, err
		}
		capacity, tokens, rate, last, version := f(r.Item, "capacity"), f(r.Item, "tokens"), f(r.Item, "refill_rate"), f(r.Item, "last_refill_at"), f(r.Item, "version")
		now := max(now, last)
		avail := min(capacity, tokens+(now-last)*rate)
		if avail < cost {
			return nil, nil
		}
		l := &sdkLease{dim: dim, pk: "lease#" + dim + "#" + fmt.Sprintf("%08x", rand.Uint32()), cost: cost}
		_, err = c.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Update: &types.Update{
				TableName: aws.String(c.table), Key: key(dim),
				UpdateExpression:          aws.String("SET tokens = :t, last_refill_at = :now, version = :nv"),
				ConditionExpression:       aws.String("version = :v"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":t": fnum(avail - cost), ":now": fnum(now), ":nv": fnum(version + 1), ":v": fnum(version)},
			}},
			{Put: &types.Put{TableName: aws.String(c.table), Item: map[string]types.AttributeValue{
				"vendor_dimension": str(l.pk), "dimension": str(dim), "cost": fnum(cost),
				"created_at": fnum(now), "ttl": fnum(float64(int64(now + ttl))), "caller": str("seed-sdk"),
			}}},
		}})
		var tc *types.TransactionCanceledException
		if errors.As(err, &tc) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return l, nil
	}
	return nil, nil
}

// release is the SDKs' release: a concurrent slot is returned with
// "SET tokens = tokens + :cost" under the capacity guard, in a transaction
// with the lease's delete; when the guard refuses, the lease alone is
// deleted. Other types only delete the lease.
func (c *seedSDK) release(ctx context.Context, l *sdkLease, concurrent bool) error {
	if !concurrent {
		_, err := c.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(c.table), Key: key(l.pk)})
		return err
	}
	return c.restore(ctx, l.dim, l.pk, l.cost)
}

// restore is the SDKs' capacity-guarded restore and delete (release and
// reconciler alike).
func (c *seedSDK) restore(ctx context.Context, dim, pk string, cost float64) error {
	r, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(c.table), Key: key(dim), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return err
	}
	if r.Item == nil {
		_, err := c.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(c.table), Key: key(pk)})
		return err
	}
	_, err = c.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{
			TableName: aws.String(c.table), Key: key(dim),
			UpdateExpression:          aws.String("SET tokens = tokens + :cost"),
			ConditionExpression:       aws.String("tokens <= :max_tokens"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":cost": fnum(cost), ":max_tokens": fnum(f(r.Item, "capacity") - cost)},
		}},
		{Delete: &types.Delete{TableName: aws.String(c.table), Key: key(pk)}},
	}})
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		_, err = c.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(c.table), Key: key(pk)})
	}
	return err
}

// reconcile is the SDKs' reconciler at now (Unix seconds): a Scan for
// lease items whose ttl has passed; for each, the parent bucket from the
// key; a concurrent one gets the item's cost back under the capacity
// guard; the item is deleted. It returns how many items it processed.
func (c *seedSDK) reconcile(ctx context.Context, now float64) (int, error) {
	out, err := c.db.Scan(ctx, &dynamodb.ScanInput{
		TableName:                 aws.String(c.table),
		FilterExpression:          aws.String("begins_with(vendor_dimension, :p) AND #ttl < :now"),
		ExpressionAttributeNames:  map[string]string{"#ttl": "ttl"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": str("lease#"), ":now": fnum(now)},
	})
	if err != nil {
		return 0, err
	}
	for _, it := range out.Items {
		pk, _ := getS(it, "vendor_dimension")
		rest := strings.TrimPrefix(pk, "lease#")
		dim := rest[:strings.LastIndexByte(rest, '#')]
		b, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(c.table), Key: key(dim), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return 0, err
		}
		if typ, _ := getS(b.Item, "limit_type"); b.Item != nil && typ == "concurrent" {
			err = c.restore(ctx, dim, pk, f(it, "cost"))
		} else {
			_, err = c.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(c.table), Key: key(pk)})
		}
		if err != nil {
			return 0, err
		}
	}
	return len(out.Items), nil
}

func f(item map[string]types.AttributeValue, name string) float64 {
	v, _ := getN(item, name)
	x, _ := strconv.ParseFloat(v, 64)
	return x
}

func fnum(x float64) types.AttributeValue { return num(strconv.FormatFloat(x, 'f', -1, 64)) }
