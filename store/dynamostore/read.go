package dynamostore

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ontopix/sluice/store"
)

// readBuckets reads rows consistently, as one snapshot (see snapshot), in
// the order of names. A missing
// row is a *store.ConfigurationError (or a validation error for a bad name).
func (s *Store) readBuckets(ctx context.Context, names []string) ([]*bucketItem, error) {
	items, err := s.snapshot(ctx, names)
	if err != nil {
		return nil, err
	}
	return decodeRows(items, names)
}

// decodeRows decodes the rows of names from items, in order. A missing row
// is a *store.ConfigurationError.
func decodeRows(items map[string]map[string]types.AttributeValue, names []string) ([]*bucketItem, error) {
	out := make([]*bucketItem, len(names))
	var err error
	for i, name := range names {
		it := items[name]
		if it == nil {
			return nil, &store.ConfigurationError{Dimension: name}
		}
		if out[i], err = decodeBucket(it); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// getItems reads items by key with strong consistency: GetItem for one,
// BatchGetItem (retrying unprocessed keys) for more.
func (s *Store) getItems(ctx context.Context, pks []string) (map[string]map[string]types.AttributeValue, error) {
	out := make(map[string]map[string]types.AttributeValue, len(pks))
	if len(pks) == 1 {
		r, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: key(pks[0]), ConsistentRead: aws.Bool(true)}, opts)
		if err != nil {
			return nil, classify("get", err)
		}
		if r.Item != nil {
			out[pks[0]] = r.Item
		}
		return out, nil
	}
	for start := 0; start < len(pks); start += 100 {
		keys := make([]map[string]types.AttributeValue, 0, 100)
		for _, pk := range pks[start:min(start+100, len(pks))] {
			keys = append(keys, key(pk))
		}
		req := map[string]types.KeysAndAttributes{s.table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
		for backoff := 10 * time.Millisecond; len(req) > 0; backoff = min(2*backoff, 500*time.Millisecond) {
			r, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req}, opts)
			if err != nil {
				return nil, classify("batch get", err)
			}
			for _, it := range r.Responses[s.table] {
				if pk, ok := getS(it, attrPK); ok {
					out[pk] = it
				}
			}
			req = r.UnprocessedKeys
			if len(req) > 0 {
				select {
				case <-ctx.Done():
					return nil, store.Unavailable("dynamostore: batch get", ctx.Err())
				case <-time.After(backoff):
				}
			}
		}
	}
	return out, nil
}

// snapshot reads items by key as of one instant: GetItem for one key,
// TransactGetItems for more. (BatchGetItem reads each item at its own
// moment: an acquisition decided on rows read across another transaction
// could report one bucket before it and another after it.) A read that a
// concurrent transaction cancels is retried after a jittered backoff.
func (s *Store) snapshot(ctx context.Context, pks []string) (map[string]map[string]types.AttributeValue, error) {
	if len(pks) <= 1 {
		return s.getItems(ctx, pks)
	}
	in := &dynamodb.TransactGetItemsInput{TransactItems: make([]types.TransactGetItem, len(pks))}
	for i, pk := range pks {
		in.TransactItems[i] = types.TransactGetItem{Get: &types.Get{TableName: aws.String(s.table), Key: key(pk)}}
	}
	for n := 0; ; n++ {
		if err := backoff(ctx, n); err != nil {
			return nil, err
		}
		r, err := s.db.TransactGetItems(ctx, in, opts)
		if err != nil {
			if conflict(err) {
				continue
			}
			return nil, classify("transact get", err)
		}
		out := make(map[string]map[string]types.AttributeValue, len(pks))
		for i, ir := range r.Responses {
			if i < len(pks) && ir.Item != nil {
				out[pks[i]] = ir.Item
			}
		}
		return out, nil
	}
}
