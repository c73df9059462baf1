package transport_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ontopix/sluice"
	sluiceprom "github.com/ontopix/sluice/observe/prometheus"
	"github.com/ontopix/sluice/vendors"
	"github.com/ontopix/sluice/vendors/transport"
	"github.com/ontopix/sluice/vendors/vendorsim"
)

const (
	waitRPM = "openai#gpt-4o#rpm"
	waitTPM = "openai#gpt-4o#tpm"
)

// waitEnv meters gpt-4o at rpm requests (none when 0) and tpm tokens a
// minute (no headroom) on the bubble's
// clock, against a simulator that limits nothing the test reaches, with
// no sync from the response headers: the balances move only by what the
// Transport takes and gives back.
func waitEnv(t *testing.T, rpm, tpm int64, extra *sluice.Observer, opts ...transport.Option) *env {
	p, err := vendors.OpenAIProfile(vendors.OpenAILimits{Model: "gpt-4o", RPM: rpm, TPM: tpm}, vendors.WithHeadroom(0))
	if err != nil {
		t.Fatal(err)
	}
	sim := vendorsim.Config{Vendor: vendorsim.OpenAI, Limits: vendorsim.Limits{RPM: 100_000, TPM: 10_000_000}}
	return newEnvObserved(t, sim, p, nil, extra, append([]transport.Option{transport.WithReactorOptions(vendors.WithoutSync())}, opts...)...)
}

// millis returns each dimension's balance in millitokens.
func millis(t *testing.T, e *env) map[string]sluice.Millitokens {
	t.Helper()
	out := map[string]sluice.Millitokens{}
	for _, d := range e.profile.Dimensions {
		st, err := e.client.GetBucket(context.Background(), d.Name)
		if err != nil {
			t.Fatal(err)
		}
		out[d.Name] = st.Tokens
	}
	return out
}

// drainTPM takes every token of waitTPM.
func drainTPM(t *testing.T, e *env, capacity int64) {
	t.Helper()
	res, err := e.client.Acquire(context.Background(), waitTPM, sluice.WithCost(capacity))
	if err != nil || !res.Granted() {
		t.Fatalf("drain: %v, %v", res.Outcome, err)
	}
}

func chat(maxTokens int64) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: "gpt-4o", MaxTokens: openai.Int(maxTokens),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}}
}

// A call whose wait is longer than its deadline, or than the Client's
// DefaultSlotTimeout when it has none, fails at once with a
// *sluice.SlotTimeoutError after one store call, and leaves every balance
// as it found it.
func TestWaitPastTheBoundFailsAtOnceReservingNothing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline bool
		cost     int64         // the call's max_tokens: its tokens charge
		timeout  time.Duration // the wait's bound
		wait     time.Duration // cost at 100 tokens a second
	}{
		{name: "deadline", deadline: true, cost: 1000, timeout: 5 * time.Second, wait: 10 * time.Second},
		{name: "no deadline, DefaultSlotTimeout", cost: 4000, timeout: sluice.DefaultConfig().DefaultSlotTimeout, wait: 40 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := waitEnv(t, 600, 6000, nil)
				drainTPM(t, e, 6000)
				ctx := context.Background()
				if tc.deadline {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
					defer cancel()
				}
				before := millis(t, e)
				start := time.Now()
				oc := openAIClient(e, 0)
				_, err := oc.Chat.Completions.New(ctx, chat(tc.cost))
				var te *sluice.SlotTimeoutError
				if !errors.As(err, &te) {
					t.Fatalf("error %v, want a *sluice.SlotTimeoutError", err)
				}
				if waited := time.Since(start); waited != 0 {
					t.Errorf("failed after %v, want at once", waited)
				}
				if te.Timeout != tc.timeout || te.RetryIn != tc.wait || te.Attempts != 1 {
					t.Errorf("timeout error %+v, want timeout %s, retry_in %s, 1 attempt", te, tc.timeout, tc.wait)
				}
				if got := millis(t, e); got[waitRPM] != before[waitRPM] || got[waitTPM] != before[waitTPM] {
					t.Errorf("balances %v after the timeout, want %v: nothing reserved", got, before)
				}
				ev := lastEvent(t, e)
				if ev.Outcome != transport.Denied || ev.Attempts != 1 || ev.Waited != 0 {
					t.Errorf("event %v, %d attempts, waited %v; want denied after 1 attempt, at once", ev.Outcome, ev.Attempts, ev.Waited)
				}
				if st := e.sim.Stats(); st.Requests != 0 {
					t.Errorf("simulator saw %d requests, want 0", st.Requests)
				}
			})
		})
	}
}

// orderRT records the X-Call header of each request it sends, in order.
type orderRT struct {
	next http.RoundTripper
	mu   sync.Mutex
	sent []string
}

func (o *orderRT) RoundTrip(req *http.Request) (*http.Response, error) {
	o.mu.Lock()
	o.sent = append(o.sent, req.Header.Get("X-Call"))
	o.mu.Unlock()
	return o.next.RoundTrip(req)
}

// On an empty tokens bucket, a large call that arrives first is sent
// before three small ones that arrive after it, although they would fit
// sooner: its tokens are reserved in arrival order. Polling, the small
// ones overtake it.
func TestWaitServesALargeCallBeforeLaterSmallOnes(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []transport.Option
		want []string
	}{
		{name: "in line", want: []string{"large", "small0", "small1", "small2"}},
		{name: "WithPolling", opts: []transport.Option{transport.WithPolling()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &orderRT{}
				e := waitEnv(t, 600, 6000, nil, append([]transport.Option{transport.WithBase(rec)}, tc.opts...)...)
				rec.next = pipeRT{e.sim}
				drainTPM(t, e, 6000)
				oc := openAIClient(e, 0)
				var wg sync.WaitGroup
				call := func(name string, maxTokens int64) {
					wg.Go(func() {
						if _, err := oc.Chat.Completions.New(testCtx(t), chat(maxTokens), outputSeven, option.WithHeader("X-Call", name)); err != nil {
							t.Errorf("%s: %v", name, err)
						}
					})
					synctest.Wait() // it is waiting before the next one comes
				}
				call("large", 3000) // 30 s away
				for i := range 3 {
					call("small"+strconv.Itoa(i), 50) // 0.5 s away each, on an empty bucket
				}
				wg.Wait()
				got := slices.Clone(rec.sent)
				if tc.want == nil {
					if len(got) != 4 || got[3] != "large" {
						t.Errorf("sent %v, want the small calls before the large one", got)
					}
					return
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("sent %v, want %v (arrival order)", got, tc.want)
				}
			})
		})
	}
}

// Transport calls are the Client's waits: the observer's WaitEvents and
// the sluice_wait_* metrics count them, granted or timed out.
func TestWaitEventsAndMetricsForTransportCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		prom, err := sluiceprom.New(reg)
		if err != nil {
			t.Fatal(err)
		}
		e := waitEnv(t, 600, 6000, prom)
		oc := openAIClient(e, 0)
		if _, err := oc.Chat.Completions.New(testCtx(t), chat(5000), option.WithHeader(vendorsim.HeaderOutputTokens, "5000")); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := oc.Chat.Completions.New(ctx, chat(5000)); !errors.Is(err, sluice.ErrSlotTimeout) {
			t.Fatalf("second call: %v, want a slot timeout", err)
		}
		waits := e.waitList()
		if len(waits) != 2 {
			t.Fatalf("%d wait events, want 2", len(waits))
		}
		if w := waits[0]; !w.Granted || w.Attempts != 1 || len(w.Dimensions) != 2 || w.Dimensions[1] != (sluice.Request{Dimension: waitTPM, Cost: 5000}) {
			t.Errorf("first wait %+v, want granted after 1 attempt with %s=5000", w, waitTPM)
		}
		if w := waits[1]; w.Granted || !w.TimedOut || w.Attempts != 1 {
			t.Errorf("second wait %+v, want timed out after 1 attempt", w)
		}
		counts := waitCounts(t, reg)
		want := map[string]uint64{"sluice_wait_seconds/granted": 1, "sluice_wait_seconds/timeout": 1,
			"sluice_wait_attempts/granted": 1, "sluice_wait_attempts/timeout": 1}
		for k, w := range want {
			if counts[k] != w {
				t.Errorf("%s count %d, want %d", k, counts[k], w)
			}
		}
	})
}

// waitCounts returns the sample count of each sluice_wait_* histogram by
// result, keyed "name/result".
func waitCounts(t *testing.T, reg *prometheus.Registry) map[string]uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_wait_seconds" && mf.GetName() != "sluice_wait_attempts" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" {
					out[mf.GetName()+"/"+l.GetValue()] = m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return out
}

// A call whose context is cancelled while it waits for its reservation to
// become valid cancels the reservation, and the request is never sent.
// The tokens bucket gets its reservation back at once. The requests bucket
// gets its request back at once; a requests bucket that was full also
// held, until the tokens' valid instant, the requests it would earn above
// its capacity by then (see "Waiting in line" in docs/architecture.md):
// those stay held until that instant, when the bucket is full again.
func TestWaitCancelledGivesTheReservationBack(t *testing.T) {
	for _, tc := range []struct {
		name string
		rpm  int64
	}{
		{name: "tokens"},
		{name: "requests and tokens", rpm: 600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := waitEnv(t, tc.rpm, 6000, nil)
				drainTPM(t, e, 6000)
				before := millis(t, e)
				ctx, cancel := context.WithCancel(testCtx(t))
				oc := openAIClient(e, 0)
				done := make(chan error, 1)
				go func() {
					_, err := oc.Chat.Completions.New(ctx, chat(1000)) // valid in 10 s
					done <- err
				}()
				synctest.Wait()
				during := millis(t, e)
				if during[waitTPM] != before[waitTPM]-1_000_000 {
					t.Fatalf("tokens balance %v while waiting, want %v less 1000 tokens reserved", during[waitTPM], before[waitTPM])
				}
				cancel()
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Errorf("error %v, want context.Canceled", err)
				}
				synctest.Wait()
				after := millis(t, e)
				if after[waitTPM] != before[waitTPM] {
					t.Errorf("tokens balance %v after the cancel, want %v", after[waitTPM], before[waitTPM])
				}
				if tc.rpm > 0 {
					if after[waitRPM] != during[waitRPM]+1000 {
						t.Errorf("requests balance %v after the cancel, want %v: the request back", after[waitRPM], during[waitRPM]+1000)
					}
					time.Sleep(10 * time.Second)
					if got := millis(t, e); got[waitRPM] != before[waitRPM] {
						t.Errorf("requests balance %v at the valid instant, want %v (full)", got[waitRPM], before[waitRPM])
					}
				}
				ev := lastEvent(t, e)
				if ev.Outcome != transport.Denied || !errors.Is(ev.Err, context.Canceled) {
					t.Errorf("event %v %v, want denied, cancelled", ev.Outcome, ev.Err)
				}
				if st := e.sim.Stats(); st.Requests != 0 {
					t.Errorf("simulator saw %d requests, want 0", st.Requests)
				}
			})
		})
	}
}
