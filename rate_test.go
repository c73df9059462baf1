package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store/memstore"
)

func TestPerMinuteBurst(t *testing.T) {
	tests := []struct {
		name string
		got  bucket.Config
		want bucket.Config
	}{
		{"no option", sluice.PerMinute(sluice.Requests, 500),
			bucket.Config{Type: bucket.Requests, Capacity: 500, RefillAmount: 500, RefillPeriod: time.Minute}},
		{"burst below the rate", sluice.PerMinute(sluice.Requests, 500, sluice.Burst(50)),
			bucket.Config{Type: bucket.Requests, Capacity: 50, RefillAmount: 500, RefillPeriod: time.Minute}},
		{"burst above the rate", sluice.PerPeriod(sluice.Tokens, 10, time.Second, sluice.Burst(100)),
			bucket.Config{Type: bucket.Tokens, Capacity: 100, RefillAmount: 10, RefillPeriod: time.Second}},
		{"last burst wins", sluice.PerMinute(sluice.Tokens, 9, sluice.Burst(3), sluice.Burst(4)),
			bucket.Config{Type: bucket.Tokens, Capacity: 4, RefillAmount: 9, RefillPeriod: time.Minute}},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, tt.got, tt.want)
		}
	}
}

// admitted counts the grants of cost 1 a client makes on dim when asked
// asks times, every 12 ms from the current time (500/min earns exactly
// 100 millitokens in 12 ms, so no fraction of a millitoken is in play).
func admitted(t *testing.T, c *sluice.Client, clk *manualClock, dim string, asks int) int {
	t.Helper()
	n := 0
	for range asks {
		res, err := c.Acquire(context.Background(), dim)
		if err != nil {
			t.Fatal(err)
		}
		if res.Granted() {
			n++
		}
		clk.Advance(12 * time.Millisecond)
	}
	return n
}

// TestBurstBoundsEveryWindow: a full bucket of capacity C refilling R per
// minute admits C + R·w/minute in a window w, under steady demand: 2n in the first minute, both ends included, without Burst,
// n + 50 with Burst(50), and n in the next minute either way.
func TestBurstBoundsEveryWindow(t *testing.T) {
	tests := []struct {
		name        string
		cfg         bucket.Config
		first, next int
	}{
		{"PerMinute(500)", sluice.PerMinute(sluice.Requests, 500), 1000, 500},
		{"PerMinute(500, Burst(50))", sluice.PerMinute(sluice.Requests, 500, sluice.Burst(50)), 550, 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, clk, _ := newClient(t)
			if err := c.PutBucket(context.Background(), sluice.Bucket{Name: "x#rpm", Config: tt.cfg}); err != nil {
				t.Fatal(err)
			}
			if got := admitted(t, c, clk, "x#rpm", 5001); got != tt.first {
				t.Errorf("[0, 60s] from full: %d admitted, want %d", got, tt.first)
			}
			if got := admitted(t, c, clk, "x#rpm", 5000); got != tt.next {
				t.Errorf("(60s, 120s]: %d admitted, want %d", got, tt.next)
			}
		})
	}
}

func TestBurstInvalid(t *testing.T) {
	c, err := sluice.New(memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	var fe *bucket.FieldError
	for _, capacity := range []int64{0, -1, bucket.MaxCapacity + 1} {
		err := c.PutBucket(context.Background(), sluice.Bucket{Name: "x#rpm", Config: sluice.PerMinute(sluice.Requests, 500, sluice.Burst(capacity))})
		if !errors.Is(err, sluice.ErrInvalid) || !errors.As(err, &fe) || fe.Field != "capacity" {
			t.Errorf("Burst(%d): PutBucket = %v, want a *FieldError on capacity", capacity, err)
		}
	}
}

func ExampleBurst() {
	// 500 requests a minute, but never more than 550 in any one-minute
	// window (a full bucket of 500 could admit 1000).
	cfg := sluice.PerMinute(sluice.Requests, 500, sluice.Burst(50))
	fmt.Println(cfg.Capacity, cfg.RefillAmount, cfg.RefillPeriod)
	// Output:
	// 50 500 1m0s
}
