package transport

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ontopix/sluice/vendors"
)

// body is a metered response body: it reads the usage as the caller reads
// the body, and finishes the call when the body is read to its end, fails,
// is closed, goes unread for the body timeout, or its request's context
// ends, whichever comes first.
type body struct {
	rc      io.ReadCloser
	c       *call
	reading atomic.Int32
	last    atomic.Int64 // when the last Read returned, Unix nanoseconds

	mu  sync.Mutex // guards tr and end
	tr  usageTracker
	end bool // the tracker was read for the settlement

	inf     *inflater // a compressed body's decoder for tr; nil otherwise
	infOnce sync.Once

	closeOnce sync.Once
	closeErr  error
}

func newBody(c *call, rc io.ReadCloser, stream bool, encoding string) *body {
	b := &body{rc: rc, c: c}
	b.tr.init(c.ev.API, stream)
	b.inf = newInflater(encoding, b.track)
	b.last.Store(time.Now().UnixNano())
	return b
}

// track passes decoded bytes to the tracker.
func (b *body) track(p []byte) {
	b.mu.Lock()
	if !b.end {
		b.tr.write(p)
	}
	b.mu.Unlock()
}

// inflated ends a compressed body's decoding: what was read is decoded.
func (b *body) inflated() {
	if b.inf != nil {
		b.infOnce.Do(b.inf.close)
	}
}

// Read implements io.Reader.
func (b *body) Read(p []byte) (int, error) {
	b.reading.Add(1)
	n, err := b.rc.Read(p)
	b.last.Store(time.Now().UnixNano())
	b.reading.Add(-1)
	if b.inf != nil {
		if n > 0 {
			b.inf.write(p[:n])
		}
		if err == io.EOF {
			b.inflated()
			b.mu.Lock()
			if !b.end {
				b.tr.eof()
			}
			b.mu.Unlock()
		}
	} else if n > 0 || err == io.EOF {
		b.mu.Lock()
		if !b.end {
			b.tr.write(p[:n])
			if err == io.EOF {
				b.tr.eof()
			}
		}
		b.mu.Unlock()
	}
	if err != nil {
		b.finish(err)
	}
	return n, err
}

// Close implements io.Closer.
func (b *body) Close() error {
	err := b.closeVendor()
	b.finish(nil)
	return err
}

// closeVendor closes the vendor's response body, once.
func (b *body) closeVendor() error {
	b.closeOnce.Do(func() { b.closeErr = b.rc.Close() })
	return b.closeErr
}

// timeout ends a body that went unread for the body timeout: it is
// settled, and the vendor's body closed, so that the connection under it
// is not held for a caller that may never come back (a later Read returns
// an error).
func (b *body) timeout() {
	b.finish(ErrBodyTimeout)
	_ = b.closeVendor()
}

// idleFor returns how long the body has gone unread; 0 while a Read is in
// progress.
func (b *body) idleFor() time.Duration {
	if b.reading.Load() > 0 {
		return 0
	}
	return time.Since(time.Unix(0, b.last.Load()))
}

// finish settles the call from what the body reported so far. cause is why
// it ended: io.EOF, a read error, ErrBodyTimeout, the context's cause, or
// nil for Close.
func (b *body) finish(cause error) {
	b.inflated()
	b.mu.Lock()
	b.end = true
	u, complete, haveIn, streamed := b.tr.usage, b.tr.complete, b.tr.haveIn, b.tr.partialOutput()
	b.mu.Unlock()
	if complete {
		if !haveIn {
			// Usage without an input count (absent, null, negative):
			// every request has input, so it is the estimate, never 0.
			u.Input = b.c.ev.Estimate.InputTokens
		}
		b.c.finish(Settled, u, nil, nil)
		return
	}
	var err error
	if cause != nil && cause != io.EOF && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	b.c.finish(Partial, u, func() []vendors.Charge {
		return b.c.partialSettle(u, haveIn, streamed)
	}, err)
}
