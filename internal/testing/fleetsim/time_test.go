package fleetsim

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ontopix/sluice"
)

// TestSkew alternates members whose clocks disagree on a 40-token bucket:
// whatever the clocks say, no window may see more than the bucket allows.
func TestSkew(t *testing.T) {
	tests := []struct {
		name   string
		clocks []Clock
	}{
		{"within the maximum skew", []Clock{{}, {Offset: 500 * time.Millisecond}}},
		{"1.1 s apart", []Clock{{}, {Offset: 1100 * time.Millisecond}}},
		{"2 s apart", []Clock{{}, {Offset: 2 * time.Second}}},
		{"one drifting 5 % fast, one 2 s behind", []Clock{{Drift: 0.05}, {Offset: -2 * time.Second}, {}}},
		{"one jumping back 3 s", []Clock{{}, {JumpAfter: 300 * time.Millisecond, Jump: -3 * time.Second}}},
	}
	for _, tt := range tests {
		for _, kind := range doorStores {
			t.Run(tt.name+"/"+kind, func(t *testing.T) {
				f := newFleet(t, kind)
				cfg := perPeriod(40, time.Minute)
				f.bucket("v#tpm", cfg)
				var ms []*Member
				var ahead time.Duration
				for _, c := range tt.clocks {
					ms = append(ms, f.join(c))
					ahead = max(ahead, c.ahead(10*time.Second)) // a run lasts far less
				}
				ctx := context.Background()
				for i := range 120 {
					if _, err := ms[i%len(ms)].Acquire(ctx, "v#tpm", 1); err != nil {
						t.Fatal(err)
					}
					if i == 60 {
						time.Sleep(400 * time.Millisecond) // let a jump happen
					}
				}
				// Every store here decides with the callers' clocks (Redis and
				// PostgreSQL in caller-clock mode), which the guarantee prices
				// at the refill of the time the fastest clock runs ahead.
				// The run is two bursts of one-shot calls, not a saturated one:
				// use is checked by the saturated scenarios (TestLatency,
				// TestPartition, TestDebtBehindQueue).
				f.verifyWithin("v#tpm", 0, skewSlack(cfg, ahead))
			})
		}
	}
}

// TestSlowStoreCall delays every request of three members by 1.1–1.7 s
// while three others call at once: a slow call's timestamp is older than
// the maximum skew, and than the bucket's last write, when the store sees
// it.
func TestSlowStoreCall(t *testing.T) {
	for _, kind := range stores[1:] {
		t.Run(kind, func(t *testing.T) {
			f := newFleet(t, kind)
			f.bucket("v#rpm", perPeriod(10, time.Minute))
			var wg sync.WaitGroup
			for i := range 6 {
				m := f.join(Clock{})
				if _, err := m.Peek(context.Background(), "v#rpm"); err != nil { // connect first
					t.Fatal(err)
				}
				slow := i%2 == 0
				if slow {
					m.Proxy.SetLatency(func() time.Duration { return 1100*time.Millisecond + rand.N(600*time.Millisecond) }, nil)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 4 {
						// A call that outlives the operation timeout fails
						// closed: no grant, nothing to check.
						if _, err := m.Acquire(context.Background(), "v#rpm", 1); err != nil && !errors.Is(err, sluice.ErrUnavailable) {
							t.Error(err)
							return
						}
						if !slow {
							time.Sleep(300 * time.Millisecond)
						}
					}
				}()
			}
			wg.Wait()
			f.verify("v#rpm", 0) // latency keeps it from saturating
		})
	}
}

// latencyUnderLoad is why TestLatency's use target is open on Redis and
// PostgreSQL: a store deciding at its own instant makes the client count
// a reservation's wait from the answer's arrival, late by the reply's
// latency (here 10–40 ms).
const latencyUnderLoad = "96.7–97.8 % on a quiet machine, 94.3 % measured under load: each reservation starts its reply's latency late"

// debtUseOpen names the stores where TestDebtBehindQueue's use target is
// not met reliably on a loaded machine.
var debtUseOpen = map[string]string{
	"postgres": "96–99 % on a quiet machine, 91 % measured under load: PostgreSQL decides at its own clock, so a reservation starts its answer's latency late, and a confirmation that finds new debt costs another round trip",
	"dynamodb": "100–101 % on a quiet machine, 88 % measured under load",
}

// TestDebtBehindQueue queues waiters that each settle above their estimate
// as soon as they proceed: the debt must delay the waiters behind them.
func TestDebtBehindQueue(t *testing.T) {
	type debt struct {
		name    string
		waiters int
		over    int64 // percent above the 250-token estimate
	}
	tests := []debt{
		{"32 waiters 30 % over", 32, 30},
		{"32 waiters 100 % over", 32, 100},
	}
	if *long {
		tests = append(tests, debt{"128 waiters 30 % over", 128, 30}, debt{"128 waiters 100 % over", 128, 100})
	}
	for _, tt := range tests {
		for _, kind := range stores {
			t.Run(tt.name+"/"+kind, func(t *testing.T) {
				if kind == "dynamodb" {
					openScenario(t, "on a loaded machine (the full test suite beside it) DynamoDB Local's calls outlast the 5 s operation timeout: reservations fail with \"row busy in this process\" or the SDK's deadline; quiet, excess ≤ 0 and use 100–101 %")
				}
				withUse(t, func(lenient bool) *fleet {
					f := newFleet(t, kind)
					f.lenient = lenient
					f.bucket("v#tpm", perPeriod(5000, 3*time.Second))
					var wg sync.WaitGroup
					for i := range tt.waiters {
						m := f.members
						if i < 4 { // four processes, each with many waiters
							f.join(Clock{})
							m = f.members
						}
						mem := m[i%len(m)]
						wg.Add(1)
						go func() {
							defer wg.Done()
							ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
							defer cancel()
							l, err := mem.Wait(ctx, []sluice.Request{{Dimension: "v#tpm", Cost: 250}})
							if err != nil {
								t.Error(err)
								return
							}
							if err := mem.Adjust(ctx, l, "v#tpm", 250*tt.over/100); err != nil {
								t.Error(err)
							}
						}()
					}
					wg.Wait()
					f.verify("v#tpm", useTarget(t, kind, debtUseOpen))
					return f
				})
			})
		}
	}
}

// TestLatency runs saturated members through 20–80 ms of latency each way.
func TestLatency(t *testing.T) {
	for _, kind := range stores[1:] {
		t.Run(kind, func(t *testing.T) {
			withUse(t, func(lenient bool) *fleet {
				f := newFleet(t, kind)
				f.lenient = lenient
				f.bucket("v#tpm", perPeriod(100, time.Second))
				saturate(t, f, 4, 3*time.Second, func(m *Member) {
					lat := func() time.Duration { return 10*time.Millisecond + rand.N(30*time.Millisecond) }
					m.Proxy.SetLatency(lat, lat)
				}, nil)
				f.verify("v#tpm", useTarget(t, kind, map[string]string{
					"redis":    latencyUnderLoad,
					"postgres": latencyUnderLoad,
					"dynamodb": "DynamoDB's use is 50–64 % with 10–40 ms of latency each way: a reservation is a write conditioned on the row's version, and with four writers and a 20–80 ms round trip 70 % of them lose (see docs/reliability.md)"}))
				return f
			})
		})
	}
}

// TestPartition cuts one member off for a second; it fails closed and the
// others keep the bucket busy. The bucket refills 10 grants of 5 tokens a
// second: what the test measures is the partition, and one DynamoDB Local
// row, a transaction per grant, takes 20–40 a second on a loaded machine
// (at 20 a second its use fell to 84–94 % with the suite running beside
// it, 98.6 % on a quiet machine). The run lasts 5 s so that the grant the
// partition may leave held and unused (fail closed) is a small part of it.
func TestPartition(t *testing.T) {
	for _, kind := range stores[1:] {
		t.Run(kind, func(t *testing.T) {
			withUse(t, func(lenient bool) *fleet {
				f := newFleet(t, kind)
				f.lenient = lenient
				f.bucket("v#tpm", perPeriod(50, time.Second))
				saturate(t, f, 3, 5*time.Second, nil, func(ms []*Member) {
					time.Sleep(time.Second)
					ms[1].Proxy.Partition()
					time.Sleep(time.Second)
					ms[1].Proxy.Heal()
				})
				f.verify("v#tpm", 0.95)
				return f
			})
		})
	}
}

// saturate runs n members, each waiting in line for 5 tokens at a time
// until d has passed; setup prepares each member and during, when set,
// runs beside them. Errors that a failed-closed store call returns end
// nothing: the member tries again.
func saturate(t *testing.T, f *fleet, n int, d time.Duration, setup func(*Member), during func([]*Member)) {
	t.Helper()
	var ms []*Member
	for range n {
		m := f.join(Clock{})
		if setup != nil {
			setup(m)
		}
		ms = append(ms, m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := m.Wait(wctx, []sluice.Request{{Dimension: "v#tpm", Cost: 5}})
				wcancel()
				if err != nil && ctx.Err() == nil {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	if during != nil {
		during(ms)
	}
	wg.Wait()
}

// refundUseOpen names the stores where TestRefundsBehindQueue's use
// target is not asserted: DynamoDB Local's row contention grows with the
// load beside it, as in TestDebtBehindQueue.
var refundUseOpen = map[string]string{
	"dynamodb": "97.7–98.6 % on a quiet machine, and at least 95 % in two CI runs; on a loaded machine DynamoDB Local's reservations lose their row to one another and wait (see TestDebtBehindQueue)",
}

// TestRefundsBehindQueue keeps 32 waiters in line on a 5 000-token bucket
// for 6 s, each call using 10–110 % of its 250-token estimate and
// settling it: refunds must let the reservations behind them proceed
// sooner, and nothing a refund moves earlier may go over the limit
// (excess 0, a grant settled below its estimate counted at its usage, one
// settled above as a charge). The bucket is saturated from the start:
// one grant takes the whole capacity before the waiters begin. A refund
// returned while the bucket is near full is the known excess this test
// does not measure (TestModelRefundOvershoot does): starting full, on a
// loaded machine whose first store calls are slow, the bucket stayed near
// full while the first refunds were on their way, and they paid for
// 207–650 tokens above capacity + refill. With one clock and a clean
// network, use is at least 95 % of capacity + refill. In a hostile fleet
// — clocks up to 400 ms apart (inside the maximum skew) and one
// drifting, 1–4 ms of latency each way, and a reply lost every 200 ms in
// one member —
// the excess is the refill of the time the fastest clock runs ahead, as
// the guarantee prices it, and use is reported: lost reservations and
// settlements cost tokens by design.
func TestRefundsBehindQueue(t *testing.T) {
	tests := []struct {
		name    string
		clocks  []Clock
		hostile bool
	}{
		{"one clock", []Clock{{}, {}, {}, {}}, false},
		{"skewed clocks, latency, lost replies", []Clock{{}, {Offset: 400 * time.Millisecond}, {Offset: -300 * time.Millisecond}, {Drift: 0.01}}, true},
	}
	for _, tt := range tests {
		for _, kind := range stores {
			t.Run(tt.name+"/"+kind, func(t *testing.T) {
				withUse(t, func(lenient bool) *fleet {
					cfg := perPeriod(5000, 3*time.Second)
					f := newFleet(t, kind)
					f.lenient = lenient
					f.bucket("v#tpm", cfg)
					var ahead time.Duration
					for _, c := range tt.clocks {
						m := f.join(c)
						ahead = max(ahead, c.ahead(30*time.Second))
						if tt.hostile && m.Proxy != nil {
							lat := func() time.Duration { return time.Millisecond + rand.N(3*time.Millisecond) }
							m.Proxy.SetLatency(lat, lat)
						}
					}
					// Saturated from the start (see above).
					if ok, err := f.members[0].Acquire(context.Background(), "v#tpm", cfg.Capacity); err != nil || !ok {
						t.Fatalf("draining the bucket: granted %v, %v", ok, err)
					}
					run, cancel := context.WithTimeout(context.Background(), 6*time.Second)
					defer cancel()
					var wg sync.WaitGroup
					if p := f.members[0].Proxy; tt.hostile && p != nil {
						wg.Go(func() {
							for run.Err() == nil {
								p.DropReplies(1)
								time.Sleep(200 * time.Millisecond)
							}
							p.DropReplies(0)
						})
					}
					for i := range 32 {
						m := f.members[i%4]
						wg.Go(func() { refundWorker(t, run, m) })
					}
					wg.Wait()
					if tt.hostile {
						f.verifyWithin("v#tpm", 0, skewSlack(cfg, ahead))
						return f
					}
					f.verify("v#tpm", useTarget(t, kind, refundUseOpen))
					return f
				})
			})
		}
	}
}

// refundWorker waits in line for 250 tokens and settles 25–275 (10–110 %)
// until run ends. A refund counts in the grant's cost; usage above the
// estimate as a charge when it is settled. A call that a loaded or faulty
// store refuses (ErrContention, ErrUnavailable) is asked again.
func refundWorker(t *testing.T, run context.Context, m *Member) {
	for run.Err() == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		actual := 25 + rand.Int64N(251)
		invoked := m.rec.Now()
		l, err := m.Client.Wait(ctx, []sluice.Request{{Dimension: "v#tpm", Cost: 250}}, sluice.WithRecord())
		if err == nil {
			m.Granted(invoked, l, map[string]int64{"v#tpm": min(actual, 250)})
			switch {
			case actual > 250:
				err = m.Adjust(ctx, l, "v#tpm", actual-250)
			case actual < 250:
				_, err = l.Adjust(ctx, "v#tpm", actual-250)
			}
		}
		cancel()
		switch {
		case errors.Is(err, sluice.ErrContention) || errors.Is(err, sluice.ErrUnavailable):
			time.Sleep(10 * time.Millisecond) // a store slowed or cut: ask again
		case err != nil:
			t.Error(err)
			return
		}
	}
}
