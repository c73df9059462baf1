package lab

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/ontopix/sluice/internal/cmd/clikit"
	"github.com/ontopix/sluice/vendors"
)

// localDim is one dimension of a process's own limiter: a
// golang.org/x/time/rate limiter at 1/P of the profile's bucket, with the
// settlement Sluice does (a charge above the estimate is taken at once,
// possibly into debt; a refund is credited to the next admissions).
type localDim struct {
	lim    *rate.Limiter
	mu     sync.Mutex
	credit int64
}

func newLocalDim(d vendors.Dimension, processes int) *localDim {
	c := d.Config
	perSec := float64(c.RefillAmount) / c.RefillPeriod.Seconds() / float64(processes)
	burst := max(1, int(c.Capacity)/processes)
	return &localDim{lim: rate.NewLimiter(rate.Limit(perSec), burst)}
}

// take waits for n, less the credit.
func (d *localDim) take(ctx context.Context, n int64) error {
	d.mu.Lock()
	d.clampLocked()
	use := min(d.credit, n)
	d.credit -= use
	d.mu.Unlock()
	n -= use
	for n > 0 {
		k := min(n, int64(d.lim.Burst()))
		if err := d.lim.WaitN(ctx, int(k)); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// clampLocked keeps the limiter's tokens plus the credit within the burst.
func (d *localDim) clampLocked() {
	room := int64(d.lim.Burst()) - int64(math.Ceil(max(0, d.lim.Tokens())))
	d.credit = max(0, min(d.credit, room))
}

// adjust charges (delta > 0, without waiting) or credits (delta < 0). A
// credit never lifts the balance above the burst, as a refund never lifts
// a bucket above its capacity.
func (d *localDim) adjust(delta int64) {
	if delta < 0 {
		d.mu.Lock()
		d.credit -= delta
		d.clampLocked()
		d.mu.Unlock()
		return
	}
	for delta > 0 {
		k := min(delta, int64(d.lim.Burst()))
		d.lim.ReserveN(time.Now(), int(k))
		delta -= k
	}
}

// localCall waits on the process's own limiters for the cost model's
// admission charge, sends c, settles to the reported usage, and on a
// retryable 429 waits the vendor's retry-after and starts over.
func (p *vbProcess) localCall(rctx context.Context, c genCall) {
	charges, err := p.prof.Admission(vendors.Call{InputTokens: c.EstInput, MaxOutputTokens: c.MaxTokens, OutputEstimate: c.EstOutput})
	if err != nil {
		p.storeError(err)
		return
	}
	var retryWait time.Duration
	for {
		t0 := time.Now()
		// Token limits first, requests last: a request slot taken while
		// the tokens are still awaited would be spent late, in a burst.
		for i := len(charges) - 1; i >= 0; i-- {
			if err := p.local[i].take(rctx, charges[i].Amount); err != nil {
				// The limiter cannot admit the call before the run ends
				// (WaitN says so at once): wait for the end, as a caller
				// waiting for its call would.
				<-rctx.Done()
				p.abandoned()
				return
			}
		}
		waited := time.Since(t0) + retryWait
		r := p.send(rctx, c)
		t2 := time.Now()
		settled, err := p.prof.Settle(charges, r.usage)
		if err == nil && r.err == nil {
			for _, s := range settled {
				for i, d := range p.prof.Dimensions {
					if d.Name == s.Dimension {
						p.local[i].adjust(s.Amount - charges[i].Amount)
					}
				}
			}
		}
		cl := p.classify(r)
		p.count(r, cl, waited, time.Since(t2))
		if r.err != nil || !cl.Retryable() {
			return
		}
		retryWait = retryDelay(cl)
		if clikit.SleepCtx(rctx, retryWait) != nil {
			p.abandoned()
			return
		}
	}
}
