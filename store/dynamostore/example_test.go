package dynamostore_test

import (
	"context"
	"log"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store/dynamostore"
)

// Example builds a DynamoDB store on a table made with
// dynamostore.CreateTable (or `sluice dynamodb create-table`) and puts a
// Client on it. Credentials and region come from the AWS SDK's default
// chain. It needs AWS, so it is compiled but not run by go test.
func Example() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("eu-west-1"))
	if err != nil {
		log.Fatal(err)
	}
	db := dynamodb.NewFromConfig(cfg, dynamostore.ClientOptions)
	st, err := dynamostore.New(db, "sluice-limits")
	if err != nil {
		log.Fatal(err) // a malformed endpoint is reported here, not as an outage
	}
	defer st.Close()
	client, err := sluice.New(st)
	if err != nil {
		log.Fatal(err)
	}
	res, err := client.Acquire(ctx, "openai#rpm")
	if err != nil {
		log.Fatal(err)
	}
	log.Println(res.Outcome)
}
