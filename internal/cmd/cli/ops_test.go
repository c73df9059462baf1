package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/internal/cmd/jsonout"
)

// TestOps runs the operation commands end to end on every store.
func TestOps(t *testing.T) { stores(t, testOps) }

// testOps runs every inspection and operation command against e's store.
func testOps(t *testing.T, e *testEnv) {
	e.ok("bucket", "put", "openai#rpm", "--type", "requests", "--capacity", "3", "--per", "1m")
	e.ok("bucket", "put", "elevenlabs#concurrent", "--type", "concurrent", "--capacity", "2")
	if out := e.ok("bucket", "list"); !regexp.MustCompile(`(?m)^openai#rpm\s+requests\s+3\s+3\s+1m0s|^openai#rpm\s+requests\s+3\s+3\s+1m\s`).MatchString(out) {
		t.Errorf("bucket list:\n%s", out)
	}

	// acquire: granted, then RETRY_IN with exit 4.
	out := e.ok("acquire", "openai#rpm:2", "--caller", "t1")
	if !strings.HasPrefix(out, "GRANTED lease ") {
		t.Fatalf("acquire:\n%s", out)
	}
	out, errs, code := e.run("acquire", "openai#rpm:2")
	if code != clikit.ExitRetry || !strings.HasPrefix(out, "RETRY_IN ") || !strings.Contains(errs, "openai#rpm short") {
		t.Fatalf("second acquire: exit %d\n%s\n%s", code, out, errs)
	}
	out, _, code = e.run("acquire", "openai#rpm:2", "-o", "json")
	var retry acquireView
	if err := json.Unmarshal([]byte(out), &retry); err != nil || code != clikit.ExitRetry || retry.Outcome != "RETRY_IN" || retry.RetryIn < jsonout.Duration(time.Millisecond) {
		t.Fatalf("json RETRY_IN: exit %d %v\n%s", code, err, out)
	}

	// A concurrent lease, listed, released by id from "another process".
	var got acquireView
	if err := json.Unmarshal([]byte(e.ok("acquire", "elevenlabs#concurrent", "--hold", "1h", "-o", "json")), &got); err != nil || got.Lease == nil {
		t.Fatalf("acquire json: %v %+v", err, got)
	}
	id := got.Lease.ID
	if out := e.ok("leases", "list", "--dimension", "elevenlabs#concurrent"); !strings.Contains(out, id) || strings.Count(out, "\n") != 2 {
		t.Errorf("leases list --dimension:\n%s", out)
	}
	var ls []leaseView
	if err := json.Unmarshal([]byte(e.ok("leases", "list", "-o", "json")), &ls); err != nil || len(ls) != 2 {
		t.Errorf("leases list json: %v %+v", err, ls)
	}
	if out := e.ok("status", "elevenlabs#concurrent"); !regexp.MustCompile(`elevenlabs#concurrent\s+concurrent\s+2 concurrent\s+2\s+1\s+50\.0%\s+1\s+on release`).MatchString(out) {
		t.Errorf("status:\n%s", out)
	}
	if out := e.ok("release", id); !strings.Contains(out, "released "+id) || !strings.Contains(out, "restored 1 to elevenlabs#concurrent") {
		t.Errorf("release:\n%s", out)
	}
	if out := e.ok("release", id); !strings.Contains(out, "not found") {
		t.Errorf("second release:\n%s", out)
	}

	// penalize: the available request goes from 1 to 0.5.
	if out := e.ok("penalize", "openai#rpm", "--factor", "0.5"); !strings.Contains(out, "penalized openai#rpm ×0.5") {
		t.Errorf("penalize:\n%s", out)
	}
	if _, errs, code := e.run("penalize", "elevenlabs#concurrent"); code != clikit.ExitError || errs == "" {
		t.Errorf("penalize concurrent: exit %d %s", code, errs)
	}

	// sync and cooldown on a tokens bucket: a cooldown shows in status
	// and denies everything until a reset ends it.
	e.ok("bucket", "put", "openai#tpm", "--type", "tokens", "--capacity", "100", "--per", "1m")
	if out := e.ok("sync", "openai#tpm", "--remaining", "40"); !strings.Contains(out, "synced openai#tpm to 40 remaining: 100 -> 40 tokens") {
		t.Errorf("sync:\n%s", out)
	}
	var cv cooldownView
	if err := json.Unmarshal([]byte(e.ok("cooldown", "openai#tpm", "--for", "1h", "-o", "json")), &cv); err != nil ||
		cv.Dimension != "openai#tpm" || cv.After != 0 || cv.Before < 40 || cv.Before > 50 || cv.Until.IsZero() {
		t.Errorf("cooldown json: %v %+v", err, cv)
	}
	if out := e.ok("status", "openai#tpm"); !regexp.MustCompile(`(?m)COOLDOWN UNTIL\n.*` + regexp.QuoteMeta(cv.Until.Format(time.RFC3339Nano)) + `\n`).MatchString(out) {
		t.Errorf("status during a cooldown:\n%s", out)
	}
	if _, _, code := e.run("acquire", "openai#tpm:1"); code != clikit.ExitRetry {
		t.Errorf("acquire during a cooldown: exit %d, want %d", code, clikit.ExitRetry)
	}
	if _, errs, code := e.run("cooldown", "elevenlabs#concurrent", "--for", "1s"); code != clikit.ExitError || !strings.Contains(errs, "elevenlabs#concurrent") {
		t.Errorf("cooldown concurrent: exit %d %s", code, errs)
	}
	if _, errs, code := e.run("sync", "openai#nope", "--remaining", "1"); code != clikit.ExitError || !strings.Contains(errs, `unknown dimension "openai#nope"`) {
		t.Errorf("sync unknown: exit %d %s", code, errs)
	}
	e.ok("bucket", "reset", "openai#tpm")
	if out := e.ok("status", "openai#tpm"); strings.Contains(out, "COOLDOWN") {
		t.Errorf("status after a reset still shows the cooldown:\n%s", out)
	}

	// An expired lease is reclaimed by reconcile.
	e.ok("acquire", "elevenlabs#concurrent", "--hold", "1ms")
	if e.mem != nil {
		e.advance(time.Second)
	} else {
		time.Sleep(20 * time.Millisecond) // let the 1 ms lease expire on the server's clock
	}
	if out := e.ok("leases", "list", "--expired"); strings.Count(out, "\n") != 2 || !strings.Contains(out, "expired ") {
		t.Errorf("leases list --expired:\n%s", out)
	}
	out, errs, code = e.run("reconcile", "-o", "json")
	var rep struct {
		Restored, Reclaimed int
		Dimensions          []string
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || rep.Restored < 1 || rep.Reclaimed != 1 {
		t.Errorf("reconcile: exit %d %v %+v\n%s\n%s", code, err, rep, out, errs)
	}
	if !strings.Contains(errs, `"msg":"reconciler.complete"`) || !strings.Contains(errs, `"already_capped":0`) {
		t.Errorf("reconcile log:\n%s", errs)
	}

	// bucket get / reset / delete.
	var bv bucketView
	if err := json.Unmarshal([]byte(e.ok("bucket", "get", "openai#rpm", "-o", "json")), &bv); err != nil || bv.Capacity != 3 || bv.Type != "requests" {
		t.Errorf("bucket get: %v %+v", err, bv)
	}
	if out := e.ok("bucket", "reset", "openai#rpm"); !strings.Contains(out, "-> 3 tokens") {
		t.Errorf("bucket reset:\n%s", out)
	}
	e.ok("bucket", "delete", "openai#rpm")
	if _, errs, code := e.run("bucket", "get", "openai#rpm"); code != clikit.ExitError || !strings.Contains(errs, "unknown dimension") {
		t.Errorf("get deleted: exit %d %s", code, errs)
	}
	if _, errs, code := e.run("acquire", "openai#rpm"); code != clikit.ExitError || !strings.Contains(errs, `unknown dimension "openai#rpm"`) {
		t.Errorf("acquire deleted: exit %d %s", code, errs)
	}
}

func TestUnavailable(t *testing.T) {
	e := &testEnv{t: t, url: fmt.Sprintf("redis://127.0.0.1:%d?timeout=2s&dial_timeout=200ms&max_retries=0", deadPort(t))}
	for _, args := range [][]string{{"status"}, {"acquire", "openai#rpm"}, {"reconcile"}} {
		_, errs, code := e.run(args...)
		if code != clikit.ExitUnavailable || !strings.Contains(errs, "store unavailable") || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
}

// TestUnavailableSQLAndDynamoDB: PostgreSQL and DynamoDB that cannot be
// reached give exit 3, for the store commands and the admin ones.
func TestUnavailableSQLAndDynamoDB(t *testing.T) {
	pg := &testEnv{t: t, url: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2&timeout=2s", deadPort(t))}
	for _, args := range [][]string{{"status"}, {"acquire", "openai#rpm"}, {"postgres", "version"}, {"postgres", "migrate"}} {
		if _, errs, code := pg.run(args...); code != clikit.ExitUnavailable || !strings.Contains(errs, "store unavailable") || strings.Count(errs, "\n") != 1 {
			t.Errorf("postgres %v: exit %d, stderr %q", args, code, errs)
		}
	}
	ddb := &testEnv{t: t, url: fmt.Sprintf("dynamodb://tbl1?region=us-east-1&endpoint=http://127.0.0.1:%d&timeout=2s", deadPort(t))}
	for _, args := range [][]string{{"status"}, {"acquire", "openai#rpm"}, {"dynamodb", "create-table"}} {
		if _, errs, code := ddb.run(args...); code != clikit.ExitUnavailable || !strings.Contains(errs, "store unavailable") || strings.Count(errs, "\n") != 1 {
			t.Errorf("dynamodb %v: exit %d, stderr %q", args, code, errs)
		}
	}
}

func TestReconcileLoop(t *testing.T) {
	e := memEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, errs, code := e.runCtx(ctx, "reconcile", "--every", "100ms")
	if code != 0 || strings.Count(errs, "reconciler.complete") < 1 {
		t.Errorf("exit %d:\n%s", code, errs)
	}
}
