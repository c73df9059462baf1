package limits_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/limits"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
)

const fileV1 = `presets:
  - preset: openai
    rpm: 10
    tpm: 1000
dimensions:
  elevenlabs#concurrent:
    type: concurrent
    capacity: 2
`

// fileV2 raises tpm and drops elevenlabs#concurrent.
const fileV2 = `presets:
  - preset: openai
    rpm: 10
    tpm: 2000
`

func parse(t *testing.T, src string) *limits.File {
	t.Helper()
	f, err := limits.Parse("limits.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// actions maps each change's dimension to its action.
func actions(cs []limits.Change) map[string]limits.Action {
	out := map[string]limits.Action{}
	for _, c := range cs {
		out[c.Dimension] = c.Action
	}
	return out
}

// tokens returns the live balance of each bucket, in millitokens.
func tokens(t *testing.T, st store.Store) map[string]int64 {
	t.Helper()
	bs, err := st.ListBuckets(context.Background(), store.ListBucketsRequest{Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, b := range bs {
		out[b.Name] = b.Tokens
	}
	return out
}

// TestApply applies files in turn to one store, as services starting up
// and an operator would: creation, a re-apply that changes nothing and
// keeps the balance a grant spent, an update, a reset and a prune.
func TestApply(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()
	c, err := sluice.New(st)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name  string
		file  string
		opts  []limits.ApplyOption
		spend bool // acquire openai#rpm once before applying
		want  map[string]limits.Action
		// wantRPM is openai#rpm's balance after applying, in millitokens:
		// the preset's bucket holds one request (10 RPM is less than one a
		// second).
		wantRPM int64
	}{
		{"create", fileV1, nil, false,
			map[string]limits.Action{"openai#rpm": limits.Create, "openai#tpm": limits.Create, "elevenlabs#concurrent": limits.Create}, 1_000},
		{"again: nothing, balance kept", fileV1, nil, true, map[string]limits.Action{}, 0},
		{"update keeps balances", fileV2, nil, false, map[string]limits.Action{"openai#tpm": limits.Update}, 0},
		{"reset refills", fileV2, []limits.ApplyOption{limits.WithReset()}, false,
			map[string]limits.Action{"openai#rpm": limits.Reset, "openai#tpm": limits.Reset}, 1_000},
		{"prune deletes the undeclared", fileV2, []limits.ApplyOption{limits.WithPrune()}, false,
			map[string]limits.Action{"elevenlabs#concurrent": limits.Delete}, 1_000},
	}
	for _, s := range steps {
		if s.spend {
			if r, err := c.Acquire(ctx, "openai#rpm"); err != nil || !r.Granted() {
				t.Fatalf("%s: Acquire = %+v, %v", s.name, r, err)
			}
		}
		done, err := limits.Apply(ctx, c, parse(t, s.file), s.opts...)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := actions(done); !equal(got, s.want) {
			t.Errorf("%s: applied %v, want %v", s.name, got, s.want)
		}
		// A balance read a moment later may have refilled a little (the
		// bucket refills 10 per 61.225 s): allow most of a request, which
		// takes 6 s to earn, but not a whole one.
		if got := tokens(t, st)["openai#rpm"]; got < s.wantRPM || got > s.wantRPM+999 {
			t.Errorf("%s: openai#rpm holds %d millitokens, want %d", s.name, got, s.wantRPM)
		}
	}
	if _, ok := tokens(t, st)["elevenlabs#concurrent"]; ok {
		t.Error("elevenlabs#concurrent survived the prune")
	}
}

func equal(a, b map[string]limits.Action) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestApplyStoreError: a store that fails is reported, wrapped, with
// nothing claimed as applied.
func TestApplyStoreError(t *testing.T) {
	st := memstore.New()
	c, err := sluice.New(st)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	done, err := limits.Apply(context.Background(), c, parse(t, fileV1))
	if err == nil || !strings.HasPrefix(err.Error(), "limits: ") || len(done) != 0 {
		t.Fatalf("Apply on a closed store = %v, %v; want a limits: error and no changes", done, err)
	}
}
