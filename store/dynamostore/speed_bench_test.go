package dynamostore

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// BenchmarkServerSpeed measures the DynamoDB server itself (DynamoDB Local
// in the tests), without the store's logic and without contention: each
// worker writes rows of its own. A transaction is shaped like a recorded
// reservation (an update of a row and two puts); a read is a consistent
// GetItem. It reports operations per second and the mean latency, the
// floor under every figure measured through the store.
func BenchmarkServerSpeed(b *testing.B) {
	ops := []struct {
		name string
		op   func(ctx context.Context, db *dynamodb.Client, table, row string, n int) error
	}{
		{"TransactWriteItems", func(ctx context.Context, db *dynamodb.Client, table, row string, n int) error {
			id := row + "#" + strconv.Itoa(n)
			_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Update: &types.Update{TableName: aws.String(table), Key: key(row), UpdateExpression: aws.String("ADD #v :one"),
					ExpressionAttributeNames: map[string]string{"#v": attrVersion}, ExpressionAttributeValues: map[string]types.AttributeValue{":one": numInt(1)}}},
				{Put: &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{attrPK: str("lease#" + id)}}},
				{Put: &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{attrPK: str("index#" + id)}}},
			}}, opts)
			return err
		}},
		{"UpdateItem", func(ctx context.Context, db *dynamodb.Client, table, row string, _ int) error {
			_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key(row), UpdateExpression: aws.String("ADD #v :one"),
				ExpressionAttributeNames: map[string]string{"#v": attrVersion}, ExpressionAttributeValues: map[string]types.AttributeValue{":one": numInt(1)}}, opts)
			return err
		}},
		{"GetItem", func(ctx context.Context, db *dynamodb.Client, table, row string, _ int) error {
			_, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(row), ConsistentRead: aws.Bool(true)}, opts)
			return err
		}},
	}
	db := newClient()
	table := newTable(b, db)
	ctx := context.Background()
	for _, o := range ops {
		for _, workers := range []int{1, 4} {
			b.Run(o.name+"/workers="+strconv.Itoa(workers), func(b *testing.B) {
				for w := range workers { // warm the JVM
					for n := range 100 {
						if err := o.op(ctx, db, table, "speed#"+strconv.Itoa(w), -n-1); err != nil {
							b.Fatal(err)
						}
					}
				}
				var mu sync.Mutex
				var busy time.Duration
				b.ResetTimer()
				var wg sync.WaitGroup
				for w := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						start := time.Now()
						for n := w; n < b.N; n += workers {
							if err := o.op(ctx, db, table, "speed#"+strconv.Itoa(w), n); err != nil {
								b.Error(err)
								return
							}
						}
						mu.Lock()
						busy += time.Since(start)
						mu.Unlock()
					}()
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
				b.ReportMetric(float64(busy.Milliseconds())/float64(b.N), "ms/op-latency")
			})
		}
	}
}
