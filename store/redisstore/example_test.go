package redisstore_test

import (
	"context"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store/redisstore"
)

// Example builds a Redis store for a fleet and a Client on it. A client
// that honours contexts (ContextTimeoutEnabled) lets the store bound each
// operation without a goroutine per call. It needs a Redis server, so it
// is compiled but not run by go test.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	st, err := redisstore.New(rdb, redisstore.WithPrefix("sluice:"), redisstore.WithTimeout(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	cfg := sluice.DefaultConfig()
	cfg.Caller = "audit-service"
	client, err := sluice.New(st, sluice.WithConfig(cfg))
	if err != nil {
		log.Fatal(err)
	}
	res, err := client.Acquire(context.Background(), "openai#rpm")
	if err != nil {
		log.Fatal(err)
	}
	log.Println(res.Outcome, res.RetryIn)
}
