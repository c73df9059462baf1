package fleetsim

import (
	"context"
	"fmt"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store/dynamostore"
)

// warmRounds is how many waits and settlements warmDynamoDB makes.
const warmRounds = 100

// warmDynamoDB runs DynamoDB Local's request paths (conditional
// transactions, consistent reads) warmRounds times on a table of its own,
// before any scenario. A fresh JVM runs them interpreted at first: its
// first few hundred transactions take 5–10 times as long as later ones,
// and a scenario that happened to run first would measure the JIT, not
// the store (its first grant came 0.7–3 s after the start, and a
// settlement could time out). A real DynamoDB has no such start.
func warmDynamoDB(ctx context.Context) error {
	db := ddbServer.Client(dynamostore.ClientOptions)
	table := ddbServer.TableName("warm")
	if err := dynamostore.CreateTable(ctx, db, table); err != nil {
		return fmt.Errorf("warming DynamoDB Local: %w", err)
	}
	s, err := dynamostore.New(db, table)
	if err != nil {
		return err
	}
	cfg := sluice.DefaultConfig()
	cfg.OpTimeout = 30 * time.Second // set-up: see the wait below
	c, err := sluice.New(s, sluice.WithConfig(cfg))
	if err != nil {
		return err
	}
	if err := c.PutBucket(ctx, sluice.Bucket{Name: "warm#tpm", Config: bucket.PerPeriod(sluice.Tokens, bucket.MaxCapacity, time.Minute)}); err != nil {
		return fmt.Errorf("warming DynamoDB Local: %w", err)
	}
	for range warmRounds {
		// Set-up, not a measurement: a cold JVM on a loaded machine took
		// more than a second for its first call.
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		l, err := c.Wait(wctx, []sluice.Request{{Dimension: "warm#tpm", Cost: 1}}, sluice.WithRecord())
		cancel()
		if err != nil {
			return fmt.Errorf("warming DynamoDB Local: %w", err)
		}
		if _, err := l.Adjust(ctx, "warm#tpm", 1); err != nil {
			return fmt.Errorf("warming DynamoDB Local: %w", err)
		}
	}
	return nil
}
