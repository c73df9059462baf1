package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/internal/testing/ddbtest"
	"github.com/ontopix/sluice/internal/testing/testproc"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/dynamostore"
)

var server *ddbtest.Server

func TestMain(m *testing.M) {
	if testproc.SkipPackage("DynamoDB Local") {
		os.Exit(0)
	}
	var err error
	if server, err = ddbtest.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: DynamoDB Local is required for these tests:", err)
		os.Exit(1)
	}
	code := m.Run()
	server.Close()
	os.Exit(code)
}

// TestHandler invokes the Lambda handler in-process, configured only by
// SLUICE_* variables, against DynamoDB Local: an abandoned concurrent slot
// comes back, an expired requests lease is cleaned up, and a second
// invocation finds nothing.
func TestHandler(t *testing.T) {
	ctx := context.Background()
	db := server.Client()
	table := server.TableName("reconciler")
	// Created as in production, TTL on: DynamoDB Local's sweeper deletes
	// the expired lease items this test plants within seconds, and the test
	// waits for it, so the handler must restore from the buckets' holder
	// entries (DynamoDB's TTL beat the reconciler).
	if err := dynamostore.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	s, err := dynamostore.New(db, table)
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	for _, b := range []store.Bucket{
		{Name: "eleven#concurrent", Config: bucket.ConcurrentSlots(2)},
		{Name: "openai#rpm", Config: bucket.PerPeriod(bucket.Requests, 100, time.Minute)},
	} {
		if err := s.PutBucket(ctx, store.PutBucketRequest{Now: past, Bucket: b}); err != nil {
			t.Fatal(err)
		}
	}
	for _, it := range []store.Item{{Dimension: "eleven#concurrent"}, {Dimension: "openai#rpm"}} {
		var res store.AcquireResult
		req := &store.AcquireRequest{Now: past, Items: []store.Item{it}, ID: store.NewLeaseID(), TTL: time.Minute, Record: true, Caller: "crashed"}
		if err := s.Acquire(ctx, req, &res); err != nil || !res.Granted {
			t.Fatal(res, err)
		}
	}

	for deadline := time.Now().Add(3 * time.Minute); ; {
		ls, err := s.Leases(ctx, store.LeaseQuery{Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("DynamoDB Local's TTL process left %d expired leases after 3 minutes", len(ls))
		}
		time.Sleep(250 * time.Millisecond) // polling the sweeper, bounded above
	}

	env := map[string]string{
		"SLUICE_TABLE_NAME":   table,
		"SLUICE_AWS_REGION":   "us-east-1",
		"SLUICE_ENDPOINT_URL": server.Endpoint,
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "local")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	var logs bytes.Buffer
	h, err := HandlerFromEnv(ctx, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, &logs)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := h(ctx)
	if err != nil || rep.Restored != 2 || rep.Reclaimed != 1 || strings.Join(rep.Dimensions, ",") != "eleven#concurrent,openai#rpm" {
		t.Fatalf("first invocation = %+v, %v; want 2 restored, 1 reclaimed", rep, err)
	}
	st, err := s.Peek(ctx, store.PeekRequest{Now: time.Now(), Dimensions: []string{"eleven#concurrent"}})
	if err != nil || st[0].Tokens != 2000 || st[0].ActiveLeases != 0 {
		t.Errorf("after: %+v %v; want both slots free", st, err)
	}
	var ev map[string]any
	line, _, _ := strings.Cut(logs.String(), "\n")
	if err := json.Unmarshal([]byte(line), &ev); err != nil || ev["msg"] != "reconciler.complete" || ev["restored"] != float64(2) || ev["already_capped"] != float64(0) {
		t.Errorf("log = %s (%v); want reconciler.complete with restored 2", logs.String(), err)
	}
	if rep, err = h(ctx); err != nil || rep.Restored != 0 {
		t.Errorf("second invocation = %+v, %v; want nothing to do", rep, err)
	}

	if _, err := HandlerFromEnv(ctx, func(string) (string, bool) { return "", false }, &logs); err == nil || !strings.Contains(err.Error(), "SLUICE_TABLE_NAME") {
		t.Errorf("without a table: %v, want an error naming SLUICE_TABLE_NAME", err)
	}
}
