package service_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	sluicev1 "github.com/ontopix/sluice/service/gen/sluice/v1"
)

// TestWatch streams a concurrent bucket over each protocol: its first
// state, then the state after a slot is taken.
func TestWatch(t *testing.T) {
	for proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			s := serve(t, "memory", limits)
			c := s.client(proto)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			stream, err := c.Watch(ctx, connect.NewRequest(&sluicev1.WatchRequest{Dimensions: []string{"v#slots"}, Interval: durationpb.New(100 * time.Millisecond)}))
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			next := func() *sluicev1.BucketState {
				t.Helper()
				if !stream.Receive() {
					t.Fatalf("the stream ended: %v", stream.Err())
				}
				b := stream.Msg().GetBuckets()
				if len(b) != 1 {
					t.Fatalf("got %d buckets, want 1", len(b))
				}
				return b[0]
			}
			if got, want := next().GetTokensMilli(), int64(2000); got != want {
				t.Errorf("first state: got %d, want %d", got, want)
			}
			if _, err := c.Acquire(ctx, connect.NewRequest(&sluicev1.AcquireRequest{Items: items("v#slots", 1)})); err != nil {
				t.Fatal(err)
			}
			if got, want := next().GetTokensMilli(), int64(1000); got != want {
				t.Errorf("after a slot was taken: got %d, want %d", got, want)
			}
		})
	}
}

// TestWatchInterval refuses an interval outside 100 ms to 1 min.
func TestWatchInterval(t *testing.T) {
	s := serve(t, "memory", limits)
	stream, err := s.client("connect").Watch(context.Background(), connect.NewRequest(&sluicev1.WatchRequest{Interval: durationpb.New(time.Millisecond)}))
	if err == nil {
		for stream.Receive() {
		}
		err = stream.Err()
	}
	if got, want := connect.CodeOf(err), connect.CodeInvalidArgument; got != want {
		t.Errorf("got %v (%v), want %v", got, err, want)
	}
}
