package main

import (
	"context"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/limits"
	sluiceprom "github.com/ontopix/sluice/observe/prometheus"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/store/redisstore"
	"github.com/ontopix/sluice/store/storeurl"
	"github.com/ontopix/sluice/vendors/transport"
)

// newClients returns the OpenAI and Anthropic clients of one replica of the
// fleet: every call goes through Sluice's transport, on the shared store.
func newClients(ctx context.Context, storeURL, limitsFile string, opts ...transport.Option) (openai.Client, anthropic.Client, error) {
	// The stores this service opens: redis://… and memory:// (offline). Only
	// these stores' drivers are linked; add pgstore.URLOpener() for
	// postgres://…, dynamostore.URLOpener() for dynamodb://….
	openers := storeurl.Openers{redisstore.URLOpener(), memstore.URLOpener()}
	st, err := openers.Open(ctx, storeURL)
	if err != nil {
		return openai.Client{}, anthropic.Client{}, err
	}
	obs, err := sluiceprom.New(prometheus.DefaultRegisterer) // sluice_* metrics
	if err != nil {
		return openai.Client{}, anthropic.Client{}, err
	}
	f, err := limits.Load(limitsFile) // presets: the vendors' limits, as buckets and profiles
	if err != nil {
		return openai.Client{}, anthropic.Client{}, err
	}
	// Applies the file (every replica may: a bucket in use is never
	// refilled) and re-creates a bucket the store lost, as a store
	// restarted empty loses them all.
	cfg, err := sluice.ConfigFromEnv() // SLUICE_LEASE_TTL, SLUICE_OP_TIMEOUT, SLUICE_CALLER, …
	if err != nil {
		return openai.Client{}, anthropic.Client{}, err
	}
	if cfg.Caller == "" {
		cfg.Caller = "summarizer"
	}
	client, err := limits.NewClient(ctx, st, f, sluice.WithConfig(cfg), sluice.WithObserver(obs))
	if err != nil {
		return openai.Client{}, anthropic.Client{}, err
	}
	t, err := transport.New(client, f.Profiles(), opts...)
	if err != nil {
		return openai.Client{}, anthropic.Client{}, err
	}
	hc := &http.Client{Transport: t}
	return openai.NewClient(option.WithHTTPClient(hc)), anthropic.NewClient(aoption.WithHTTPClient(hc)), nil
}
