package service_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/ontopix/sluice"
	limitsfile "github.com/ontopix/sluice/limits"
	"github.com/ontopix/sluice/service"
	sluicev1 "github.com/ontopix/sluice/service/gen/sluice/v1"
)

// openAI429 is what OpenAI answers when the tokens per minute ran out.
const openAI429 = `{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Used 29937, Requested 385. Please try again in 644ms.","type":"tokens","code":"rate_limit_exceeded"}}`

// openAIQuota is what OpenAI answers when the account's credit ran out.
const openAIQuota = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`

// TestObserve hands vendor responses to the service, on every store: a
// success's headers lower the balance, a 429 cools its dimension down for
// the fleet, and a quota 429 cools nothing and is reported.
func TestObserve(t *testing.T) {
	f, err := limitsfile.Parse("limits.yaml", []byte("presets:\n  - preset: openai\n    model: gpt-4o\n    rpm: 500\n    tpm: 30000\n"))
	if err != nil {
		t.Fatal(err)
	}
	var buckets []sluice.Bucket
	for _, p := range f.Profiles() {
		for _, d := range p.Dimensions {
			buckets = append(buckets, sluice.Bucket{Name: d.Name, Config: d.Config})
		}
	}
	for _, kind := range stores {
		t.Run(kind, func(t *testing.T) {
			s := serve(t, kind, buckets, service.WithProfiles(f.Profiles()))
			c := s.client("connect")
			ctx := context.Background()
			observe := func(status int32, headers map[string]string, body string) *sluicev1.ObserveResponse {
				t.Helper()
				res, err := c.Observe(ctx, connect.NewRequest(&sluicev1.ObserveRequest{Profile: "openai#gpt-4o", Status: status, Headers: headers, Body: []byte(body)}))
				if err != nil {
					t.Fatal(err)
				}
				return res.Msg
			}
			got := observe(200, map[string]string{"x-ratelimit-limit-tokens": "30000", "x-ratelimit-remaining-tokens": "12000", "x-ratelimit-reset-tokens": "36s"}, "")
			if got.GetKind() != "ok" || !slices.Contains(got.GetSynced(), "openai#gpt-4o#tpm") {
				t.Errorf("a success with headers: got %v, want the tokens synced", got)
			}
			if len(got.GetDrift()) != 1 || got.GetDrift()[0].GetReported() != 12000 {
				t.Errorf("drift: got %v, want the vendor's 12,000 beside Sluice's belief", got.GetDrift())
			}
			st, err := s.lib.GetBucket(ctx, "openai#gpt-4o#tpm")
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Tokens.Tokens(); got > 12100 {
				t.Errorf("tokens after the sync: got %.0f, want at most the vendor's 12,000 (+ refill)", got)
			}

			got = observe(429, map[string]string{"retry-after-ms": "644"}, openAI429)
			if got.GetKind() != "rate_limited" || !slices.Contains(got.GetCooled(), "openai#gpt-4o#tpm") {
				t.Errorf("a 429 on tokens: got %v, want the tokens cooled", got)
			}
			st, err = s.lib.GetBucket(ctx, "openai#gpt-4o#tpm")
			if err != nil {
				t.Fatal(err)
			}
			if !st.CoolingDown() {
				t.Error("the tokens bucket is not cooling down after the 429")
			}

			got = observe(429, nil, openAIQuota)
			if got.GetKind() != "quota_exhausted" || len(got.GetCooled()) != 0 || got.GetError() == "" {
				t.Errorf("a quota 429: got %v, want nothing cooled and the error reported", got)
			}
		})
	}
}

// TestObserveRefusals: an unknown profile names the known ones; a status
// that is not HTTP's is invalid.
func TestObserveRefusals(t *testing.T) {
	f, err := limitsfile.Parse("limits.yaml", []byte("presets:\n  - preset: anthropic\n    rpm: 50\n    input_tpm: 40000\n    output_tpm: 8000\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, "memory", nil, service.WithProfiles(f.Profiles()))
	c := s.client("connect")
	_, err = c.Observe(context.Background(), connect.NewRequest(&sluicev1.ObserveRequest{Profile: "openai", Status: 200}))
	if got, want := codeOf(t, err), connect.CodeNotFound; got != want || !strings.Contains(err.Error(), "anthropic") {
		t.Errorf("unknown profile: got %v (%v), want %v naming anthropic", got, err, want)
	}
	_, err = c.Observe(context.Background(), connect.NewRequest(&sluicev1.ObserveRequest{Profile: "anthropic", Status: 42}))
	if got, want := codeOf(t, err), connect.CodeInvalidArgument; got != want {
		t.Errorf("status 42: got %v, want %v", got, want)
	}
}
