// Command sluice-reconciler is the reconciler as an AWS Lambda: every
// invocation (EventBridge, rate(5 minutes)) runs one reconcile pass over the
// DynamoDB table — expired concurrent leases give their slots back with the
// capacity guard, expired records of every type and orphans are deleted —
// and logs reconciler.complete as JSON.
//
// It is configured by the SLUICE_* environment variables:
// SLUICE_TABLE_NAME (required), SLUICE_AWS_REGION, SLUICE_ENDPOINT_URL
// (DynamoDB Local, LocalStack) and SLUICE_LOG_LEVEL. Credentials come from
// the Lambda execution role (the AWS SDK's default chain). Build it for the
// provided.al2023 runtime:
//
//	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -o bootstrap ./cmd/sluice-reconciler
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	h, err := HandlerFromEnv(context.Background(), os.LookupEnv, os.Stdout)
	if err != nil {
		slog.Error("reconciler.config", slog.String("error", err.Error()))
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lambda.Start(h)
}
