package service_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ontopix/sluice"
	sluicev1 "github.com/ontopix/sluice/service/gen/sluice/v1"
)

// limits are the buckets the tests share: 3 requests a minute, 1,000
// tokens a minute and 2 slots.
var limits = []sluice.Bucket{
	{Name: "v#rpm", Config: sluice.PerMinute(sluice.Requests, 3)},
	{Name: "v#tpm", Config: sluice.PerMinute(sluice.Tokens, 1000)},
	{Name: "v#slots", Config: sluice.ConcurrentLimit(2)},
}

// TestAcquireGrantsAndDenies runs one acquisition after another on every
// store and protocol until the requests bucket is spent: a denial is an
// answer with retry_in, not an error.
func TestAcquireGrantsAndDenies(t *testing.T) {
	for _, kind := range stores {
		for proto := range protocols {
			t.Run(kind+"/"+proto, func(t *testing.T) {
				s := serve(t, kind, limits)
				c := s.client(proto)
				ctx := context.Background()
				req := &sluicev1.AcquireRequest{Items: items("v#rpm", 1, "v#tpm", 200), Caller: "test"}
				for i := range 3 {
					res, err := c.Acquire(ctx, connect.NewRequest(req))
					if err != nil {
						t.Fatal(err)
					}
					if !res.Msg.GetGranted() || res.Msg.GetLease().GetId() == "" {
						t.Fatalf("call %d: got %v, want a grant with a lease", i, res.Msg)
					}
					if got, want := res.Msg.GetLease().GetCaller(), "test"; got != want {
						t.Errorf("caller: got %q, want %q", got, want)
					}
					// The bucket refills 16.7 tokens a second meanwhile.
					if got, want := res.Msg.GetDimensions()[1].GetRemainingMilli(), int64(1000-200*(i+1))*1000; got < want || got > want+5000 {
						t.Errorf("call %d: tokens left: got %d, want %d (+ at most 5,000 refilled)", i, got, want)
					}
				}
				res, err := c.Acquire(ctx, connect.NewRequest(req))
				if err != nil {
					t.Fatal(err)
				}
				if res.Msg.GetGranted() || res.Msg.GetLease() != nil {
					t.Fatalf("got %v, want a denial", res.Msg)
				}
				if got := res.Msg.GetRetryIn().AsDuration(); got <= 0 || got > 20*time.Second {
					t.Errorf("retry_in: got %s, want (0, 20s]: a request every 20 s", got)
				}
				if got, want := s.srv.Held(), 3; got != want {
					t.Errorf("held: got %d, want %d", got, want)
				}
			})
		}
	}
}

// TestSettleReleaseHeartbeat settles an estimate, extends and releases a
// lease, and checks each step on the bucket.
func TestSettleReleaseHeartbeat(t *testing.T) {
	for _, kind := range stores {
		t.Run(kind, func(t *testing.T) {
			s := serve(t, kind, limits)
			c := s.client("connect")
			ctx := context.Background()
			res, err := c.Acquire(ctx, connect.NewRequest(&sluicev1.AcquireRequest{Items: items("v#tpm", 300, "v#slots", 1)}))
			if err != nil {
				t.Fatal(err)
			}
			id := res.Msg.GetLease().GetId()
			st, err := c.Settle(ctx, connect.NewRequest(&sluicev1.SettleRequest{LeaseId: id, Dimension: "v#tpm", Amount: &sluicev1.SettleRequest_Actual{Actual: 450}}))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := st.Msg.GetHeld(), int64(450); got != want {
				t.Errorf("held: got %d, want %d", got, want)
			}
			if got, want := st.Msg.GetAppliedMilli(), int64(150_000); got != want {
				t.Errorf("applied: got %d, want %d", got, want)
			}
			st, err = c.Settle(ctx, connect.NewRequest(&sluicev1.SettleRequest{LeaseId: id, Dimension: "v#tpm", Amount: &sluicev1.SettleRequest_Delta{Delta: -50}}))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := st.Msg.GetHeld(), int64(400); got != want {
				t.Errorf("held after delta: got %d, want %d", got, want)
			}

			before := res.Msg.GetLease().GetExpiresAt().AsTime()
			hb, err := c.Heartbeat(ctx, connect.NewRequest(&sluicev1.HeartbeatRequest{LeaseIds: []string{id, "nope"}, Ttl: durationpb.New(time.Hour)}))
			if err != nil {
				t.Fatal(err)
			}
			r := hb.Msg.GetResults()
			if r[0].GetError() != "" || !r[0].GetExpiresAt().AsTime().After(before.Add(50*time.Minute)) {
				t.Errorf("heartbeat: got %v, want the lease extended by an hour", r[0])
			}
			if got, want := r[1].GetError(), "unknown"; got != want {
				t.Errorf("heartbeat of an unknown lease: got %q, want %q", got, want)
			}

			peek := func() int64 {
				p, err := c.Peek(ctx, connect.NewRequest(&sluicev1.PeekRequest{Dimensions: []string{"v#slots"}}))
				if err != nil {
					t.Fatal(err)
				}
				return p.Msg.GetBuckets()[0].GetTokensMilli()
			}
			if got, want := peek(), int64(1000); got != want {
				t.Errorf("slots free while held: got %d, want %d", got, want)
			}
			for i, want := range []bool{true, false} {
				rel, err := c.Release(ctx, connect.NewRequest(&sluicev1.ReleaseRequest{LeaseId: id}))
				if err != nil {
					t.Fatal(err)
				}
				if got := rel.Msg.GetReleased(); got != want {
					t.Errorf("release %d: got released %v, want %v", i, got, want)
				}
			}
			if got, want := peek(), int64(2000); got != want {
				t.Errorf("slots free after release: got %d, want %d", got, want)
			}
			_, err = c.Settle(ctx, connect.NewRequest(&sluicev1.SettleRequest{LeaseId: id, Dimension: "v#tpm", Amount: &sluicev1.SettleRequest_Actual{Actual: 1}}))
			if got, want := codeOf(t, err), connect.CodeNotFound; got != want {
				t.Errorf("settle after release: got %v, want %v", got, want)
			}
		})
	}
}

// TestWaitInLine has a caller wait on the server for a slot that another
// caller releases, and a caller whose wait cannot end in time answered at
// once with retry_in.
func TestWaitInLine(t *testing.T) {
	for _, kind := range stores {
		t.Run(kind, func(t *testing.T) {
			s := serve(t, kind, limits)
			c := s.client("grpc")
			ctx := context.Background()
			var held []string
			for range 2 {
				res, err := c.Acquire(ctx, connect.NewRequest(&sluicev1.AcquireRequest{Items: items("v#slots", 1)}))
				if err != nil || !res.Msg.GetGranted() {
					t.Fatalf("got %v, %v, want a slot", res, err)
				}
				held = append(held, res.Msg.GetLease().GetId())
			}
			done := make(chan *sluicev1.WaitResponse, 1)
			go func() {
				res, err := c.Wait(ctx, connect.NewRequest(&sluicev1.WaitRequest{Items: items("v#slots", 0), MaxWait: durationpb.New(10 * time.Second)}))
				if err != nil {
					t.Error(err)
				}
				done <- res.Msg
			}()
			time.Sleep(100 * time.Millisecond) // let the waiter take its place in line
			if _, err := c.Release(ctx, connect.NewRequest(&sluicev1.ReleaseRequest{LeaseId: held[0]})); err != nil {
				t.Fatal(err)
			}
			got := <-done
			if !got.GetGranted() {
				t.Fatalf("got %v, want the released slot", got)
			}

			// The requests bucket is spent for 20 s: a wait of 1 s fails fast.
			for range 3 {
				if _, err := c.Acquire(ctx, connect.NewRequest(&sluicev1.AcquireRequest{Items: items("v#rpm", 1)})); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			res, err := c.Wait(ctx, connect.NewRequest(&sluicev1.WaitRequest{Items: items("v#rpm", 1), MaxWait: durationpb.New(time.Second)}))
			if err != nil {
				t.Fatal(err)
			}
			if res.Msg.GetGranted() || res.Msg.GetRetryIn().AsDuration() < 10*time.Second {
				t.Errorf("got %v, want a denial with retry_in about 20 s", res.Msg)
			}
			if d := time.Since(start); d > 900*time.Millisecond {
				t.Errorf("the denial took %s: it should not wait for the bound", d)
			}
		})
	}
}

// TestWaitBoundByTheCallsDeadline waits with no max_wait: the call's own
// deadline bounds the wait, and the answer arrives before it.
func TestWaitBoundByTheCallsDeadline(t *testing.T) {
	s := serve(t, "memory", limits)
	c := s.client("grpc")
	for range 2 {
		if _, err := c.Acquire(context.Background(), connect.NewRequest(&sluicev1.AcquireRequest{Items: items("v#slots", 1)})); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err := c.Wait(ctx, connect.NewRequest(&sluicev1.WaitRequest{Items: items("v#slots", 1)}))
	if err != nil {
		t.Fatalf("got %v, want a denial before the deadline", err)
	}
	if res.Msg.GetGranted() {
		t.Fatal("granted a slot that is held")
	}
}

// TestIdempotencyKey sends an acquisition twice with one key: the second
// gets the first's lease, and the bucket is charged once.
func TestIdempotencyKey(t *testing.T) {
	s := serve(t, "memory", limits)
	c := s.client("connect")
	ctx := context.Background()
	req := &sluicev1.AcquireRequest{Items: items("v#tpm", 100), IdempotencyKey: "k1", Caller: "svc"}
	a, err := c.Acquire(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Acquire(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.Msg.GetLease().GetId(), a.Msg.GetLease().GetId(); got != want {
		t.Errorf("resent: got lease %q, want %q", got, want)
	}
	p, err := c.Peek(ctx, connect.NewRequest(&sluicev1.PeekRequest{Dimensions: []string{"v#tpm"}}))
	if err != nil {
		t.Fatal(err)
	}
	// Charged once: 900 tokens left, and what refilled meanwhile (16.7 a
	// second); charged twice would leave 800.
	if got, want := p.Msg.GetBuckets()[0].GetTokensMilli(), int64(900_000); got < want || got > want+5000 {
		t.Errorf("tokens: got %d, want %d (+ at most 5,000 refilled)", got, want)
	}
	other := &sluicev1.AcquireRequest{Items: items("v#tpm", 100), IdempotencyKey: "k1", Caller: "another"}
	c2, err := c.Acquire(ctx, connect.NewRequest(other))
	if err != nil {
		t.Fatal(err)
	}
	if c2.Msg.GetLease().GetId() == a.Msg.GetLease().GetId() {
		t.Error("another caller's key was answered with the first caller's lease")
	}
	// The key sent again with another request is refused: its answer
	// would be the first request's lease, and the second's dimensions
	// would go uncharged.
	for _, m := range []*sluicev1.AcquireRequest{
		{Items: items("v#rpm", 1), IdempotencyKey: "k1", Caller: "svc"},
		{Items: items("v#tpm", 101), IdempotencyKey: "k1", Caller: "svc"},
	} {
		_, err := c.Acquire(ctx, connect.NewRequest(m))
		if got, want := codeOf(t, err), connect.CodeInvalidArgument; got != want || !strings.Contains(err.Error(), "idempotency_key") {
			t.Errorf("key k1 reused for %v: got %v (%v), want %v naming idempotency_key", m.GetItems(), got, err, want)
		}
	}
}

// TestErrors checks each refusal's code and that its message names the
// field or dimension.
func TestErrors(t *testing.T) {
	s := serve(t, "memory", limits)
	c := s.client("connect")
	ctx := context.Background()
	tests := []struct {
		name string
		req  *sluicev1.AcquireRequest
		code connect.Code
		msg  string
	}{
		{"no items", &sluicev1.AcquireRequest{}, connect.CodeInvalidArgument, "items"},
		{"unknown dimension", &sluicev1.AcquireRequest{Items: items("nope#rpm", 1)}, connect.CodeNotFound, "nope#rpm"},
		{"negative cost", &sluicev1.AcquireRequest{Items: items("v#tpm", -5)}, connect.CodeInvalidArgument, "cost[v#tpm]"},
		{"cost above capacity", &sluicev1.AcquireRequest{Items: items("v#tpm", 5000)}, connect.CodeInvalidArgument, "v#tpm"},
		{"empty dimension", &sluicev1.AcquireRequest{Items: items("", 1)}, connect.CodeInvalidArgument, "items[0].dimension"},
		{"negative ttl", &sluicev1.AcquireRequest{Items: items("v#rpm", 1), Ttl: durationpb.New(-time.Second)}, connect.CodeInvalidArgument, "ttl"},
		{"ttl too long", &sluicev1.AcquireRequest{Items: items("v#rpm", 1), Ttl: durationpb.New(48 * time.Hour)}, connect.CodeInvalidArgument, "ttl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Acquire(ctx, connect.NewRequest(tt.req))
			if got := codeOf(t, err); got != tt.code {
				t.Errorf("code: got %v (%v), want %v", got, err, tt.code)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("message %q does not name %q", err, tt.msg)
			}
		})
	}
	t.Run("settle without amount", func(t *testing.T) {
		_, err := c.Settle(ctx, connect.NewRequest(&sluicev1.SettleRequest{LeaseId: "x", Dimension: "v#tpm"}))
		if got, want := codeOf(t, err), connect.CodeNotFound; got != want {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("heartbeat of nothing", func(t *testing.T) {
		_, err := c.Heartbeat(ctx, connect.NewRequest(&sluicev1.HeartbeatRequest{}))
		if got, want := codeOf(t, err), connect.CodeInvalidArgument; got != want {
			t.Errorf("got %v, want %v", got, want)
		}
	})
}

// TestMalformedAndOversized sends what a broken client might: a body that
// is not JSON, a field of the wrong type, and a request above the size
// bound.
func TestMalformedAndOversized(t *testing.T) {
	s := serve(t, "memory", limits)
	tests := []struct {
		name, body string
		status     int
	}{
		{"not protobuf", "\xff\xff\xff\x0f garbage", http.StatusBadRequest},
		{"not json", `{"items": [`, http.StatusBadRequest},
		{"wrong type", `{"items": "v#rpm"}`, http.StatusBadRequest},
		{"unknown field", `{"itemz": []}`, http.StatusBadRequest},
		{"oversized", `{"caller": "` + strings.Repeat("x", 70<<10) + `"}`, http.StatusTooManyRequests},
		{"ok", `{"items": [{"dimension": "v#rpm", "cost": 1}]}`, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctype := "application/json"
			if tt.name == "not protobuf" {
				ctype = "application/proto"
			}
			status, body := s.post(t, "Acquire", ctype, tt.body)
			if status != tt.status {
				t.Errorf("status: got %d (%s), want %d", status, body, tt.status)
			}
		})
	}
}

// TestCloseReleasesHeldLeases closes the server: the slots it held go
// back, and acquisitions are refused.
func TestCloseReleasesHeldLeases(t *testing.T) {
	s := serve(t, "redis", limits)
	c := s.client("connect")
	ctx := context.Background()
	for range 2 {
		if _, err := c.Acquire(ctx, connect.NewRequest(&sluicev1.AcquireRequest{Items: items("v#slots", 1)})); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := s.lib.GetBucket(ctx, "v#slots")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.Tokens, sluice.Millitokens(2000); got != want {
		t.Errorf("free slots after Close: got %v, want %v", got, want)
	}
	_, err = c.Acquire(ctx, connect.NewRequest(&sluicev1.AcquireRequest{Items: items("v#slots", 1)}))
	if got, want := codeOf(t, err), connect.CodeUnavailable; got != want {
		t.Errorf("after Close: got %v, want %v", got, want)
	}
}
