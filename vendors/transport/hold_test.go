package transport_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/store/memstore"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
)

// jumpClock is a Client clock the test moves ahead of the runtime's.
type jumpClock struct {
	mu    sync.Mutex
	ahead time.Duration
}

func (c *jumpClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.ahead)
}

func (c *jumpClock) jump(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ahead += d
}

// A call's lease is held, and renewed, by its sluice.SlotHandle while the
// body is unread; a lease the handle gives up meanwhile (here the
// Client's clock jumped past its expiry, so no renewal can keep it) is
// reported in the call's Event, whose Err matches sluice.ErrLeaseLost.
func TestLeaseLostWhileTheBodyIsHeldIsReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := &jumpClock{}
		c, err := sluice.New(memstore.New(), sluice.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		p := openAIProfile(t, vendors.OpenAILimits{Model: "gpt-4o", RPM: 600, TPM: 30_000})
		for _, b := range p.Buckets() {
			if err := c.PutBucket(context.Background(), b); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		var evs []transport.Event
		tr, err := transport.New(c, []vendors.Profile{p},
			transport.WithBase(pipeRT{hostile(`{"prompt_tokens":8,"completion_tokens":5,"total_tokens":13}`)}),
			transport.WithRoute(transport.Route{Host: simHost, Vendor: vendors.OpenAI}),
			transport.WithEvents(func(_ context.Context, ev transport.Event) { mu.Lock(); evs = append(evs, ev); mu.Unlock() }))
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodPost, "https://"+simHost+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o","max_tokens":50,"messages":[{"role":"user","content":"hello"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		clk.jump(2 * time.Minute)    // past the lease's 60 s TTL
		time.Sleep(25 * time.Second) // the first renewal, at a third of the TTL, finds it expired
		synctest.Wait()
		if err := resp.Body.Close(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(evs) != 1 {
			t.Fatalf("%d events, want 1", len(evs))
		}
		// Closed unread: settled at what it saw, as any such body is.
		if ev := evs[0]; ev.Outcome != transport.Partial || !errors.Is(ev.Err, sluice.ErrLeaseLost) {
			t.Errorf("event %v, err %v; want partial, with an error matching ErrLeaseLost", ev.Outcome, ev.Err)
		}
	})
}
