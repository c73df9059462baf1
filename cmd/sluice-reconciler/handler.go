package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/reconcile"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/dynamostore"
)

// Handler runs one reconcile pass per invocation and returns its report
// (restored, dimensions and already_capped, plus the other counters) as
// the Lambda's result. The event is ignored.
type Handler func(ctx context.Context) (reconcile.Report, error)

// NewHandler returns a Handler over st, logging to log. Its passes run
// through a sluice.Client over st (see reconcile.New).
func NewHandler(st store.Store, log *slog.Logger, opts ...reconcile.Option) (Handler, error) {
	r, err := reconcile.New(st, append([]reconcile.Option{reconcile.WithLogger(log)}, opts...)...)
	if err != nil {
		return nil, err
	}
	return handlerOf(r, log), nil
}

// handlerOf returns the Handler running r.
func handlerOf(r *reconcile.Reconciler, log *slog.Logger) Handler {
	return func(ctx context.Context) (reconcile.Report, error) {
		rep, err := r.RunOnce(ctx)
		if err != nil {
			log.LogAttrs(ctx, slog.LevelError, "reconciler.error", slog.String("error", err.Error()),
				slog.Int("restored", rep.Restored))
		}
		return rep, err
	}
}

// HandlerFromEnv builds the Handler from the SLUICE_* variables read
// through lookup, logging JSON to out. The DynamoDB client uses the AWS
// SDK's default credential chain and dynamostore.ClientOptions.
func HandlerFromEnv(ctx context.Context, lookup func(string) (string, bool), out io.Writer) (Handler, error) {
	cfg, err := sluice.ConfigFromLookup(lookup)
	if err != nil {
		return nil, err
	}
	if cfg.TableName == "" {
		return nil, errors.New("sluice-reconciler: SLUICE_TABLE_NAME is required")
	}
	var lo []func(*config.LoadOptions) error
	if cfg.AWSRegion != "" {
		lo = append(lo, config.WithRegion(cfg.AWSRegion))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return nil, fmt.Errorf("sluice-reconciler: AWS configuration: %w", err)
	}
	db := dynamodb.NewFromConfig(awsCfg, dynamostore.ClientOptions, func(o *dynamodb.Options) {
		if cfg.EndpointURL != "" {
			o.BaseEndpoint = aws.String(cfg.EndpointURL)
		}
	})
	st, err := dynamostore.New(db, cfg.TableName)
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: cfg.LogLevel}))
	// The Client reads the same SLUICE_* configuration and logs store
	// errors; a batch is bounded by the store's own timeouts, not by the
	// per-acquisition OpTimeout.
	cfg.OpTimeout = 0
	c, err := sluice.New(st, sluice.WithConfig(cfg), sluice.WithLogger(log))
	if err != nil {
		return nil, err
	}
	r, err := reconcile.NewForClient(c, reconcile.WithLogger(log))
	if err != nil {
		return nil, err
	}
	return handlerOf(r, log), nil
}
