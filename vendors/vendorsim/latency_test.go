package vendorsim

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// A stream's output is debited from OTPM as each token is produced, after
// the time to first token and then the per-token time; a JSON response's
// output is debited when it completes.
func TestLatencyAndOutputDebitedAsProduced(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{true: "stream", false: "json"}[stream], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, err := New(Config{Vendor: Anthropic, Limits: Limits{OTPM: 6000},
					TimeToFirstToken: FixedDuration(time.Second), PerOutputToken: FixedDuration(100 * time.Millisecond)})
				if err != nil {
					t.Fatal(err)
				}
				body := messagesBody(1, 10)
				if stream {
					body = `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
				}
				done := make(chan int)
				go func() { done <- post(t, s, PathMessages, body, HeaderOutputTokens, "5").Code }()
				output := func() int64 { return metricStats(t, s, MetricOutputTokens).Counted }
				// Token k (from 1) is produced at 1 s + (k−1)·100 ms.
				steps := []struct {
					after time.Duration
					want  int64
				}{{999 * time.Millisecond, 0}, {time.Millisecond, 1}, {250 * time.Millisecond, 3}, {149 * time.Millisecond, 4}, {time.Millisecond, 5}}
				if !stream {
					steps = []struct {
						after time.Duration
						want  int64
					}{{1399 * time.Millisecond, 0}, {time.Millisecond, 5}}
				}
				for _, st := range steps {
					time.Sleep(st.after)
					synctest.Wait()
					if got := output(); got != st.want {
						t.Fatalf("after %v: output counted %d, want %d", st.after, got, st.want)
					}
				}
				if code := <-done; code != http.StatusOK {
					t.Fatalf("status %d", code)
				}
			})
		})
	}
}
