package fleetsim

import (
	"context"
	"testing"
	"time"

	"github.com/ontopix/sluice"
	"github.com/ontopix/sluice/history"
	"github.com/ontopix/sluice/store/dynamostore"
)

// TestUsageHistory runs the usage history in the fleet's world: three
// members with clocks 2 s apart (one drifting 5 % fast), each with its
// own history.Recorder writing through its own fault proxy, while every
// other flush of each loses its reply (the store wrote the rows; the
// member does not know, keeps them and writes them again) and some
// acquisitions lose theirs. Afterwards the fleet's history, read by
// another process, holds exactly what the members saw: their grants and
// their errors, by caller, whatever their clocks and the lost replies;
// and the bucket was never over-admitted. One flush is stalled past its
// deadline and reaches the store after the member's later flushes, as a
// request held up on one connection while the next went through another
// does: the rows must keep the later totals.
func TestUsageHistory(t *testing.T) {
	for _, kind := range doorStores {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			f := newFleet(t, kind)
			reader := f.open(f.target)
			if ds, ok := reader.(*dynamostore.Store); ok {
				if err := dynamostore.CreateUsageTable(ctx, ddbServer.Client(dynamostore.ClientOptions), ds.UsageTable()); err != nil {
					t.Fatal(err)
				}
			}
			f.bucket("v#tpm", perPeriod(60, time.Minute))
			clocks := []Clock{{}, {Offset: 2 * time.Second}, {Drift: 0.05, Offset: -2 * time.Second}}
			type member struct {
				m         *Member
				rec       *history.Recorder
				caller    string
				seen      history.Counts // what the member's client answered
				lostFlush int
			}
			var ms []*member
			for i, c := range clocks {
				c.start = f.rec.start
				m := &Member{Clock: &c, rec: f.rec}
				addr := ""
				if kind != "memory" {
					p, err := NewProxy(f.target)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { p.Close() })
					m.Proxy, addr = p, p.Addr
				}
				st := f.open(addr)
				rec, err := history.New(st, history.WithClock(m.Clock))
				if err != nil {
					t.Fatal(err)
				}
				cfg := sluice.DefaultConfig()
				cfg.OpTimeout, cfg.Caller = shortTimeout, "member-"+itoa(int64(i))
				cl, err := sluice.New(st, sluice.WithClock(m.Clock), sluice.WithConfig(cfg), sluice.WithObserver(rec.Observer()))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = cl.Close() })
				m.Client = cl
				ms = append(ms, &member{m: m, rec: rec, caller: "member-" + itoa(int64(i))})
			}
			var late <-chan struct{} // closed when the stalled flush has reached the store
			if kind == "memory" {
				c := make(chan struct{})
				close(c)
				late = c
			}
			for round := range 8 {
				for i, x := range ms {
					for call := range 4 {
						if x.m.Proxy != nil && (round+i+call)%7 == 0 {
							x.m.Proxy.DropReplies(1) // this acquisition's reply is lost
						}
						ok, err := x.m.Acquire(ctx, "v#tpm", 1)
						switch {
						case err != nil:
							x.seen.Errors++
						case ok:
							x.seen.Grants++
						default:
							x.seen.Refusals++
						}
					}
					if x.m.Proxy != nil && round%2 == 0 {
						x.m.Proxy.DropReplies(1) // the flush's reply is lost
						x.lostFlush++
					}
					_ = x.rec.Flush(ctx) // a lost reply keeps the rows for the next one
				}
			}
			if x := ms[1]; x.m.Proxy != nil {
				acquire := func() {
					if ok, err := x.m.Acquire(ctx, "v#tpm", 1); err == nil && ok {
						x.seen.Grants++
					} else if err == nil {
						x.seen.Refusals++
					} else {
						x.seen.Errors++
					}
				}
				acquire()
				// This flush's put reaches the store after the next one's,
				// which holds later totals.
				late = lateFlush(t, x.m.Proxy, x.rec, x.caller)
				acquire()
			}
			for _, x := range ms {
				if err := x.rec.Flush(ctx); err != nil {
					t.Fatalf("%s: last flush: %v", x.caller, err)
				}
			}
			select {
			case <-late:
				time.Sleep(200 * time.Millisecond) // for the store to apply it
			case <-time.After(10 * time.Second):
				t.Fatal("the held-back flush never reached the store")
			}
			rd, err := history.New(reader)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			for _, x := range ms {
				for _, step := range []time.Duration{time.Minute, time.Hour} { // minute rows, hour rows
					pts, err := rd.Query(ctx, history.Query{Dimension: "v#tpm", Caller: x.caller,
						From: now.Add(-2 * time.Hour), To: now.Add(2 * time.Hour), Step: step})
					if err != nil {
						t.Fatal(err)
					}
					var got history.Counts
					for _, p := range pts {
						got.Grants += p.Counts.Grants
						got.Refusals += p.Counts.Refusals
						got.Errors += p.Counts.Errors
					}
					t.Logf("%s by the %v: saw %d grants, %d refusals, %d errors; history holds %d, %d, %d (%d flush replies lost)",
						x.caller, step, x.seen.Grants, x.seen.Refusals, x.seen.Errors, got.Grants, got.Refusals, got.Errors, x.lostFlush)
					if got.Grants != x.seen.Grants || got.Refusals != x.seen.Refusals || got.Errors != x.seen.Errors {
						t.Errorf("%s by the %v: history holds %d grants, %d refusals, %d errors; the member saw %d, %d, %d",
							x.caller, step, got.Grants, got.Refusals, got.Errors, x.seen.Grants, x.seen.Refusals, x.seen.Errors)
					}
				}
			}
			f.verify("v#tpm", 0) // the acquisitions themselves: excess 0
		})
	}
}

// lateStall is how long lateFlush holds its put back.
const lateStall = time.Second

// lateFlush flushes rec with its put (the request naming caller) held
// back lateStall by p, past the flush's deadline: the flush fails, the
// Recorder keeps its rows for the next one, and the put reaches the store
// later. It returns a channel closed when the put has been sent on to the
// store.
func lateFlush(t *testing.T, p *Proxy, rec *history.Recorder, caller string) <-chan struct{} {
	t.Helper()
	held := p.HoldBack([]byte(caller), lateStall)
	ctx, cancel := context.WithTimeout(context.Background(), lateStall/4)
	defer cancel()
	if err := rec.Flush(ctx); err == nil {
		t.Fatal("a flush held back past its deadline succeeded")
	}
	return held
}
