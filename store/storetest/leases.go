package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/ontopix/sluice/bucket"
	"github.com/ontopix/sluice/store"
)

// adjStep is one Adjust in a table case; wantErr nil means it succeeds.
type adjStep struct {
	at                                int64
	delta                             int64
	wantHeld, wantApplied, wantRemain int64
	wantErr                           error
}

// testLeaseOps covers Adjust, Extend and Penalize (the Lease semantics,
// "Penalize").
func testLeaseOps(t *testing.T, h Harness) {
	withDebt := func(c bucket.Config, debt int64) bucket.Config { c.MaxDebt = debt; return c }
	perMin := func(n int64) bucket.Config { return bucket.PerPeriod(bucket.Tokens, n, time.Minute) }
	tests := []struct {
		name      string
		cfg       bucket.Config
		reserve   int64
		steps     []adjStep
		finalAt   int64
		wantFinal int64
	}{
		{"refund within held", perMin(10_000), 2000, []adjStep{{0, -700, 1300, -700_000, 8_700_000, nil}}, 0, 8_700_000},
		{"charge into debt, refund out of it, refill repays", perMin(2000), 2000, []adjStep{
			{0, 600, 2600, 600_000, -600_000, nil},
			{0, -700, 1900, -700_000, 100_000, nil},
			{0, 600, 2500, 600_000, -500_000, nil},
		}, 30_000, 500_000},
		{"refund larger than held fails, then the whole refund works", perMin(10_000), 2000, []adjStep{
			{0, -2001, 0, 0, 0, store.ErrInvalid},
			{0, -2000, 0, -2_000_000, 10_000_000, nil},
		}, 0, 10_000_000},
		// A charge the floor clamps raises the held cost only by what it
		// took, so a later refund can never return tokens never charged.
		{"charge clamped at the default floor (-capacity)", perMin(1000), 1000, []adjStep{{0, 1500, 2000, 1_000_000, -1_000_000, nil}}, 60_000, 0},
		{"no debt allowed", withDebt(perMin(1000), bucket.NoDebt), 1000, []adjStep{{0, 600, 1000, 0, 0, nil}}, 0, 0},
		{"custom debt floor", withDebt(perMin(1000), 200), 1000, []adjStep{{0, 600, 1200, 200_000, -200_000, nil}}, 0, -200_000},
		{"refund after a clamped charge returns only what was charged", withDebt(perMin(1000), 1000), 900, []adjStep{
			{0, 1500, 2000, 1_100_000, -1_000_000, nil},
			{0, -2001, 0, 0, 0, store.ErrInvalid},
			{0, -2000, 0, -2_000_000, 1_000_000, nil},
		}, 0, 1_000_000},
		{"refund clamped at capacity", perMin(1000), 500, []adjStep{{59_000, -500, 0, 0, 1_000_000, nil}}, 59_000, 1_000_000},
		// Usage reported after expiry still counts; only refunds are refused.
		{"expired lease", perMin(1000), 500, []adjStep{
			{59_999, 100, 600, 100_000, 900_000, nil}, // refilled to full first
			{60_000, -100, 0, 0, 0, store.ErrLeaseExpired},
			{60_000, 300, 900, 300_000, 600_016, nil},
		}, 60_000, 600_016},
	}
	for _, tt := range tests {
		for _, recorded := range []bool{true, false} {
			mode := map[bool]string{true: "recorded", false: "unrecorded"}[recorded]
			t.Run("Adjust/"+tt.name+"/"+mode, func(t *testing.T) {
				e := newEnv(t, h)
				e.put(0, store.Bucket{Name: "openai#tpm", Config: tt.cfg})
				req := e.req(0, item("openai#tpm", tt.reserve))
				req.Record = recorded
				res := e.grant(req)
				held := tt.reserve
				for i, st := range tt.steps {
					before := e.snapshot(st.at)
					got, err := e.s.Adjust(e.ctx, store.AdjustRequest{Now: At(st.at), ID: req.ID, Recorded: recorded || res.Recorded,
						Dimension: "openai#tpm", Delta: st.delta, Held: held, ExpiresAt: res.ExpiresAt})
					if st.wantErr != nil {
						wantErr(t, "Adjust", err, st.wantErr)
						e.unchanged(st.at, before, "a failed Adjust")
						continue
					}
					want := store.Settlement{Held: st.wantHeld, Applied: st.wantApplied, Remaining: st.wantRemain}
					if err != nil || got != want {
						t.Fatalf("step %d: Adjust(%+d at +%dms) = %+v, %v; want %+v", i, st.delta, st.at, got, err, want)
					}
					held = got.Held
					if recorded {
						ls, err := e.s.Leases(e.ctx, store.LeaseQuery{Now: At(st.at), Dimension: "openai#tpm"})
						if err != nil || len(ls) != 1 || ls[0].Items[0].Cost != st.wantHeld {
							t.Errorf("step %d: lease record = %+v, %v; want cost %d", i, ls, err, st.wantHeld)
						}
					}
				}
				e.wantTokens(tt.finalAt, "openai#tpm", tt.wantFinal)
			})
		}
	}

	t.Run("Adjust/errors", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, tpm("openai#tpm", 1000))
		e.put(0, slots("openai#concurrent", 2))
		e.put(0, rpm("openai#rpm", 100))
		req := e.req(0, item("openai#tpm", 100), item("openai#concurrent", 1))
		e.grant(req)
		adj := func(r store.AdjustRequest) error {
			r.Now = At(10)
			_, err := e.s.Adjust(e.ctx, r)
			return err
		}
		before := e.snapshot(10)
		wantErr(t, "unknown recorded lease", adj(store.AdjustRequest{ID: e.id(), Recorded: true, Dimension: "openai#tpm", Delta: 1}), store.ErrUnknownLease)
		wantErr(t, "concurrent dimension", adj(store.AdjustRequest{ID: req.ID, Recorded: true, Dimension: "openai#concurrent", Delta: 1}), store.ErrInvalid, "openai#concurrent")
		wantErr(t, "dimension not in the lease", adj(store.AdjustRequest{ID: req.ID, Recorded: true, Dimension: "openai#rpm", Delta: 1}), store.ErrInvalid, "openai#rpm")
		wantErr(t, "unknown dimension", adj(store.AdjustRequest{ID: req.ID, Recorded: true, Dimension: "openai#nope", Delta: 1}), store.ErrUnknownDimension, "openai#nope")
		e.unchanged(10, before, "failed Adjusts")
		if _, err := e.s.Release(e.ctx, store.ReleaseRequest{Now: At(20), ID: req.ID}); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "released lease", adj(store.AdjustRequest{ID: req.ID, Recorded: true, Dimension: "openai#tpm", Delta: 1}), store.ErrUnknownLease)
	})

	t.Run("Extend", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, slots("eleven#concurrent", 1))
		req := e.req(0, item("eleven#concurrent", 1))
		req.TTL = 10 * time.Second
		e.grant(req)
		exp, err := e.s.Extend(e.ctx, store.ExtendRequest{Now: At(5000), ID: req.ID, TTL: 10 * time.Second})
		if err != nil || !exp.Equal(At(15_000)) {
			t.Fatalf("Extend = %s, %v; want %s", exp, err, At(15_000))
		}
		if st := e.peek(5000, "eleven#concurrent"); !st.NextExpiry.Equal(At(15_000)) {
			t.Errorf("NextExpiry = %s after Extend, want %s", st.NextExpiry, At(15_000))
		}
		// The old expiry has passed but the lease lives on.
		if r, err := e.s.Reconcile(e.ctx, store.ReconcileRequest{Now: At(12_000)}); err != nil || r.Restored != 0 {
			t.Errorf("Reconcile before the new expiry = %+v, %v; want nothing restored", r, err)
		}
		e.wantTokens(12_000, "eleven#concurrent", 0)
		before := e.snapshot(15_000)
		_, err = e.s.Extend(e.ctx, store.ExtendRequest{Now: At(15_000), ID: req.ID, TTL: time.Second})
		wantErr(t, "Extend at expiry", err, store.ErrLeaseExpired)
		_, err = e.s.Extend(e.ctx, store.ExtendRequest{Now: At(15_000), ID: e.id(), TTL: time.Second})
		wantErr(t, "Extend unknown lease", err, store.ErrUnknownLease)
		e.unchanged(15_000, before, "failed Extends")
	})

	testPenalize(t, h)
}

func testPenalize(t *testing.T, h Harness) {
	tests := []struct {
		name       string
		take       int64 // from openai#rpm (100/min) at +0
		debt       int64 // then charged into debt on openai#tpm instead, when > 0
		at, factor int64
		before     int64
		after      int64
	}{
		{"default factor 0.8", 40, 0, 0, 800, 60_000, 48_000},
		{"refills first", 40, 0, 3000, 800, 65_000, 52_000},
		{"rounds down", 97, 0, 0, 999, 3000, 2997},
		{"factor 0 empties", 40, 0, 0, 0, 60_000, 0},
		{"factor 1 keeps", 40, 0, 0, 1000, 60_000, 60_000},
		{"debt is left alone", 0, 500, 0, 500, -500_000, -500_000},
	}
	for _, tt := range tests {
		t.Run("Penalize/"+tt.name, func(t *testing.T) {
			e := newEnv(t, h)
			dim := "openai#rpm"
			e.put(0, rpm(dim, 100))
			if tt.debt > 0 {
				dim = "openai#tpm"
				e.put(0, tpm(dim, 1000))
				r := e.req(0, item(dim, 1000))
				r.Record = true
				e.grant(r)
				if _, err := e.s.Adjust(e.ctx, store.AdjustRequest{Now: At(0), ID: r.ID, Recorded: true, Dimension: dim, Delta: tt.debt}); err != nil {
					t.Fatal(err)
				}
			} else {
				e.grant(e.req(0, item(dim, tt.take)))
			}
			got, err := e.s.Penalize(e.ctx, store.PenalizeRequest{Now: At(tt.at), Dimension: dim, FactorMilli: tt.factor})
			if want := (store.Penalty{Before: tt.before, After: tt.after}); err != nil || got != want {
				t.Fatalf("Penalize = %+v, %v; want %+v", got, err, want)
			}
			e.wantTokens(tt.at, dim, tt.after)
		})
	}
	t.Run("Penalize/errors", func(t *testing.T) {
		e := newEnv(t, h)
		e.put(0, slots("eleven#concurrent", 3))
		before := e.snapshot(0)
		_, err := e.s.Penalize(e.ctx, store.PenalizeRequest{Now: At(0), Dimension: "eleven#concurrent", FactorMilli: 800})
		wantErr(t, "Penalize concurrent", err, store.ErrInvalid, "eleven#concurrent")
		_, err = e.s.Penalize(e.ctx, store.PenalizeRequest{Now: At(0), Dimension: "eleven#nope", FactorMilli: 800})
		wantErr(t, "Penalize unknown", err, store.ErrUnknownDimension, "eleven#nope")
		var ce *store.ConfigurationError
		if !errors.As(err, &ce) {
			t.Errorf("Penalize unknown: error %T, want *store.ConfigurationError", err)
		}
		e.unchanged(0, before, "failed Penalizes")
	})
}
