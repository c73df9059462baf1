package service

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/service/auth"
	sluicev1 "github.com/ontopix/sluice/service/gen/sluice/v1"
)

// Bounds of Watch's interval.
const (
	minWatchInterval     = 100 * time.Millisecond
	maxWatchInterval     = time.Minute
	defaultWatchInterval = time.Second
)

func (a *api) Watch(ctx context.Context, req *connect.Request[sluicev1.WatchRequest], stream *connect.ServerStream[sluicev1.WatchResponse]) error {
	m := req.Msg
	dims := m.GetDimensions()
	if err := auth.Check(ctx, auth.Read, dims...); err != nil {
		return err
	}
	every := defaultWatchInterval
	if d := m.GetInterval(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() < minWatchInterval || d.AsDuration() > maxWatchInterval {
			return invalidArg("interval", d.AsDuration(), "must be from 100ms to 1m")
		}
		every = d.AsDuration()
	}
	p := auth.FromContext(ctx)
	last := map[string]*sluicev1.BucketState{}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		states, err := a.read(ctx, dims)
		if err != nil {
			return toConnect(err)
		}
		out := &sluicev1.WatchResponse{}
		for _, st := range states {
			if p != nil && !p.Matches(st.Name) {
				continue
			}
			b := bucketState(st)
			if prev, ok := last[st.Name]; ok && same(prev, b) {
				continue
			}
			last[st.Name] = b
			out.Buckets = append(out.Buckets, b)
		}
		if len(out.Buckets) > 0 || len(last) == 0 {
			if err := stream.Send(out); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// read returns the buckets named, or all of them.
func (a *api) read(ctx context.Context, dims []string) ([]sluice.BucketState, error) {
	if len(dims) == 0 {
		return a.s.c.Buckets(ctx)
	}
	return a.s.c.Peek(ctx, dims...)
}

// same reports whether two readings of a bucket differ only in the
// instant they were read. It compares them in place, without copies (it
// runs for every bucket of every stream on every tick): their instants are
// set aside for the comparison and put back.
func same(a, b *sluicev1.BucketState) bool {
	an, bn := a.Now, b.Now
	a.Now, b.Now = nil, nil
	eq := proto.Equal(a, b)
	a.Now, b.Now = an, bn
	return eq
}
