package vendors_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/internal/contract"
	"github.com/ontopix/sluice/store"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/vendors"
)

type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// reactorEnv is an OpenAI profile (RPM 600, TPM 60,000, no headroom) on a
// memory store with a manual clock.
type reactorEnv struct {
	ctx     context.Context
	clock   *manualClock
	client  *sluice.Client
	profile vendors.Profile
	rpm     string
	tpm     string
}

func newReactorEnv(t *testing.T) *reactorEnv {
	t.Helper()
	return newReactorEnvOn(t, memstore.New())
}

// newReactorEnvOn is newReactorEnv over st.
func newReactorEnvOn(t *testing.T, st store.Store) *reactorEnv {
	t.Helper()
	clk := &manualClock{now: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	c, err := sluice.New(st, sluice.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	p, err := vendors.OpenAIProfile(vendors.OpenAILimits{Model: "gpt-4o", RPM: 600, TPM: 60_000}, vendors.WithHeadroom(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, b := range p.Buckets() {
		if err := c.PutBucket(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	rpm, _ := p.Dimension(vendors.Requests)
	tpm, _ := p.Dimension(vendors.Tokens)
	return &reactorEnv{ctx: ctx, clock: clk, client: c, profile: p, rpm: rpm, tpm: tpm}
}

func (e *reactorEnv) reactor(opts ...vendors.ReactorOption) *vendors.Reactor {
	return vendors.NewReactor(e.client, e.profile, append([]vendors.ReactorOption{vendors.WithReactorClock(e.clock)}, opts...)...)
}

// settle is how long a lower limit must be reported before it is
// believed without a 429: a tenth of the token dimension's window.
func settle(p vendors.Profile) time.Duration {
	for _, d := range p.Dimensions {
		if d.Metric == vendors.Tokens {
			return d.Window / 10
		}
	}
	panic("no token dimension")
}

// believe makes r believe the lower limit h reports: it observes h, which
// is not followed yet, and again once it has been reported for the settle
// time; it returns the second Reaction.
func believe(t *testing.T, r *vendors.Reactor, clk *manualClock, p vendors.Profile, h http.Header) vendors.Reaction {
	t.Helper()
	ctx := context.Background()
	re, err := r.Observe(ctx, 200, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(re.Resized) != 0 || len(re.Unconfirmed) == 0 {
		t.Fatalf("a first lower report: Resized %v, Unconfirmed %v; want it not believed yet", re.Resized, re.Unconfirmed)
	}
	clk.advance(settle(p))
	re, err = r.Observe(ctx, 200, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	return re
}

func (e *reactorEnv) state(t *testing.T, dim string) sluice.BucketState {
	t.Helper()
	s, err := e.client.GetBucket(e.ctx, dim)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

const openAITPM429 = `{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 60000, Used 59937, Requested 385. Please try again in 644ms.","type":"tokens","code":"rate_limit_exceeded"}}`

func TestReactorCoolsTheNamedDimensionDown(t *testing.T) {
	e := newReactorEnv(t)
	re, err := e.reactor().Observe(e.ctx, 429, header("retry-after-ms", "2000"), []byte(openAITPM429))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := re.Cooled, []string{e.tpm}; len(got) != 1 || got[0] != want[0] {
		t.Fatalf("Cooled = %v, want %v", got, want)
	}
	if !errors.Is(re.Err(), vendors.ErrRateLimited) {
		t.Errorf("Err() = %v, want ErrRateLimited", re.Err())
	}
	s := e.state(t, e.tpm)
	if want := e.clock.Now().Add(2 * time.Second); !s.CooldownUntil.Equal(want) || s.Tokens != 0 {
		t.Errorf("tpm after the 429: cooldown until %v, tokens %v; want %v, 0", s.CooldownUntil, s.Tokens, want)
	}
	if s := e.state(t, e.rpm); !s.CooldownUntil.IsZero() {
		t.Errorf("rpm cooled down too (until %v); the 429 named tokens only", s.CooldownUntil)
	}
	e.clock.advance(1999 * time.Millisecond)
	r, err := e.client.Acquire(e.ctx, e.tpm, sluice.WithCost(1))
	if err != nil {
		t.Fatal(err)
	}
	if r.Granted() {
		t.Fatal("a grant on tpm 1 ms before the cooldown's end")
	}
}

func TestReactorWithoutDelayEmptiesEveryTimeBasedDimension(t *testing.T) {
	e := newReactorEnv(t)
	body := `{"error":{"message":"Too many requests","type":"requests","code":"rate_limit_exceeded"}}`
	re, err := e.reactor().Observe(e.ctx, 429, http.Header{}, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(re.Cooled) != 1 || re.Cooled[0] != e.rpm {
		t.Fatalf("Cooled = %v, want [%s] (the body names requests)", re.Cooled, e.rpm)
	}
	if s := e.state(t, e.rpm); s.Tokens != 0 || !s.CooldownUntil.IsZero() {
		t.Errorf("rpm after a 429 without a delay: tokens %v, cooldown %v; want 0 and none", s.Tokens, s.CooldownUntil)
	}
	if s := e.state(t, e.tpm); s.Tokens.Tokens() != 60_000 {
		t.Errorf("tpm changed to %v; the 429 named requests", s.Tokens)
	}
}

func TestReactorSyncsRemainingOnEveryResponse(t *testing.T) {
	e := newReactorEnv(t)
	h := header("x-ratelimit-limit-tokens", "60000", "x-ratelimit-remaining-tokens", "41000", "x-ratelimit-reset-tokens", "19s",
		"x-ratelimit-limit-requests", "600", "x-ratelimit-remaining-requests", "599", "x-ratelimit-reset-requests", "100ms")
	re, err := e.reactor().Observe(e.ctx, 200, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(re.Synced) != 2 || len(re.Cooled) != 0 || len(re.Resized) != 0 || re.Err() != nil {
		t.Fatalf("Reaction = %+v; want both dimensions synced, nothing else", re)
	}
	if got := e.state(t, e.tpm).Tokens.Tokens(); got != 41_000 {
		t.Errorf("tpm = %v, want 41000 (lowered to what the vendor reports)", got)
	}
	if got, want := e.state(t, e.rpm).Tokens.Tokens(), float64(e.profile.Dimensions[0].Config.Capacity); got != want {
		t.Errorf("rpm = %v, want %v (599 remaining is more than the bucket holds: never raised)", got, want)
	}
	_, err = e.reactor(vendors.WithoutSync()).Observe(e.ctx, 200, header("x-ratelimit-remaining-tokens", "10"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.state(t, e.tpm).Tokens.Tokens(); got != 41_000 {
		t.Errorf("tpm = %v after a response with sync off; want 41000", got)
	}
}

func TestReactorFollowsALoweredLimitAndBack(t *testing.T) {
	e := newReactorEnv(t)
	r := e.reactor()
	full := e.state(t, e.tpm).Bucket.Config
	re := believe(t, r, e.clock, e.profile, header("x-ratelimit-limit-tokens", "30000"))
	if len(re.Resized) != 1 || re.Resized[0] != e.tpm {
		t.Fatalf("Resized = %v, want [%s]", re.Resized, e.tpm)
	}
	half := e.state(t, e.tpm)
	if got, want := half.Capacity, full.Capacity/2; got != want {
		t.Errorf("capacity at half the limit = %d, want %d", got, want)
	}
	if got, want := half.RefillAmount, full.RefillAmount/2; got != want || half.RefillPeriod != full.RefillPeriod {
		t.Errorf("refill at half the limit = %d per %s, want %d per %s", got, half.RefillPeriod, want, full.RefillPeriod)
	}
	if got := half.Tokens.Tokens(); got != 30_000 {
		t.Errorf("balance = %v, want 30000 (clamped to the new capacity)", got)
	}
	re, err := r.Observe(e.ctx, 200, header("x-ratelimit-limit-tokens", "30000"), nil)
	if err != nil || len(re.Resized) != 0 {
		t.Errorf("second response at the same limit: Resized %v, %v; want nothing (already applied)", re.Resized, err)
	}
	re, err = r.Observe(e.ctx, 200, header("x-ratelimit-limit-tokens", "60000"), nil)
	if err != nil || len(re.Resized) != 1 {
		t.Fatalf("back at the full limit: Resized %v, %v; want the bucket restored", re.Resized, err)
	}
	if got := e.state(t, e.tpm).Bucket.Config; got != full {
		t.Errorf("restored config = %+v, want %+v", got, full)
	}
}

func TestReactorNonRetryableCoolsNothing(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   error
	}{
		{"quota", 429, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","code":"insufficient_quota"}}`, vendors.ErrQuotaExhausted},
		{"too large", 429, `{"error":{"message":"Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 60000, Requested 90000.","type":"tokens","code":"rate_limit_exceeded"}}`, vendors.ErrRequestTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newReactorEnv(t)
			re, err := e.reactor().Observe(e.ctx, tt.status, header("retry-after", "20"), []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if !errors.Is(re.Err(), tt.want) {
				t.Errorf("Err() = %v, want %v", re.Err(), tt.want)
			}
			if len(re.Cooled) != 0 {
				t.Errorf("Cooled = %v, want nothing", re.Cooled)
			}
			if s := e.state(t, e.tpm); !s.CooldownUntil.IsZero() || s.Tokens.Tokens() != 60_000 {
				t.Errorf("tpm changed: %+v", s)
			}
		})
	}
}

func TestScaleConfigNeverMorePermissive(t *testing.T) {
	p, err := vendors.OpenAIProfile(vendors.OpenAILimits{RPM: 10_000, TPM: 2_000_000})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range p.Dimensions {
		for _, f := range []int64{1, 2, 3, 7, 50, 99, 100} {
			got := vendors.ScaleConfig(d.Config, d.Limit*f/100, d.Limit)
			if err := got.Validate(); err != nil {
				t.Fatalf("%s at %d%%: %v", d.Name, f, err)
			}
			// Scaled capacity and refill never exceed f% of the original.
			if got.Capacity*100 > max(100, d.Config.Capacity*f) || got.RefillAmount*100 > max(100, d.Config.RefillAmount*f) {
				t.Errorf("%s at %d%%: %+v from %+v", d.Name, f, got, d.Config)
			}
		}
	}
}

func TestReactorRestoresALimitLeftLoweredByAnotherProcess(t *testing.T) {
	e := newReactorEnv(t)
	full := e.state(t, e.tpm).Bucket.Config
	believe(t, e.reactor(), e.clock, e.profile, header("x-ratelimit-limit-tokens", "30000"))
	// That process dies; a new one sees the full limit again.
	re, err := e.reactor().Observe(e.ctx, 200, header("x-ratelimit-limit-tokens", "60000"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(re.Resized) != 1 {
		t.Fatalf("Resized = %v, want the bucket restored by the new process", re.Resized)
	}
	if got := e.state(t, e.tpm).Bucket.Config; got != full {
		t.Errorf("config = %+v, want %+v", got, full)
	}
	re, err = e.reactor().Observe(e.ctx, 200, header("x-ratelimit-limit-tokens", "60000"), nil)
	if err != nil || len(re.Resized) != 0 {
		t.Errorf("a third process at the full limit: Resized %v, %v; want nothing", re.Resized, err)
	}
}

// tickingClock moves forward by step every time it is read, as a real
// clock does between the Reactor's reading and the store call.
type tickingClock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

func (c *tickingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}

// TestReactorShortRetryAfterLateCooldown: a 429 asking for a 1 ms wait
// still cools the dimension down when time passes between the response's
// arrival and the cooldown's store call (the store refuses an end less than
// 1 ms after its call).
func TestReactorShortRetryAfterLateCooldown(t *testing.T) {
	clk := &tickingClock{now: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC), step: 400 * time.Microsecond}
	c, err := sluice.New(memstore.New(), sluice.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	p, err := vendors.OpenAIProfile(vendors.OpenAILimits{Model: "gpt-4o", RPM: 600, TPM: 60_000}, vendors.WithHeadroom(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, b := range p.Buckets() {
		if err := c.PutBucket(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	r := vendors.NewReactor(c, p, vendors.WithReactorClock(clk))
	h := header("retry-after-ms", "1", "x-ratelimit-limit-tokens", "60000", "x-ratelimit-remaining-tokens", "0")
	re, err := r.Observe(ctx, 429, h, []byte(openAITPM429))
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	tpm, _ := p.Dimension(vendors.Tokens)
	if len(re.Cooled) != 1 || re.Cooled[0] != tpm {
		t.Errorf("Cooled = %v, want [%s]", re.Cooled, tpm)
	}
}

// barrierSyncs holds each Sync until n of them are in flight at once (or
// a second has passed, then it fails the call).
type barrierSyncs struct {
	store.Store
	n       int
	mu      sync.Mutex
	arrived int
	all     chan struct{}
}

func (s *barrierSyncs) Sync(ctx context.Context, req store.SyncRequest) (store.SyncResult, error) {
	s.mu.Lock()
	s.arrived++
	if s.arrived == s.n {
		close(s.all)
	}
	s.mu.Unlock()
	select {
	case <-s.all:
	case <-time.After(time.Second):
		return store.SyncResult{}, errors.New("test: syncs one after another")
	}
	return contract.AsSyncer(s.Store).Sync(ctx, req)
}

// TestReactorSyncsDimensionsAtOnce: a response that reports several
// dimensions costs one store round trip on the caller's path, not one per
// dimension.
func TestReactorSyncsDimensionsAtOnce(t *testing.T) {
	st := &barrierSyncs{Store: memstore.New(), n: 2, all: make(chan struct{})}
	e := newReactorEnvOn(t, st)
	h := header("x-ratelimit-limit-tokens", "60000", "x-ratelimit-remaining-tokens", "41000", "x-ratelimit-reset-tokens", "19s",
		"x-ratelimit-limit-requests", "600", "x-ratelimit-remaining-requests", "599", "x-ratelimit-reset-requests", "100ms")
	re, err := e.reactor().Observe(e.ctx, 200, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(re.Synced) != 2 || re.Err() != nil {
		t.Fatalf("Reaction = %+v (%v); want both dimensions synced together", re, re.Err())
	}
}
