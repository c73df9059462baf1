// Package fleetsim runs real sluice.Client instances, each with its own
// clock and its own connection to a real store through a loopback fault
// proxy, under conditions the code did not choose, and records what they
// admitted for package fleetcheck to judge. Its scenarios are its tests.
package fleetsim

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is a loopback TCP proxy between one client and a store that can
// delay replies, drop a reply after the server acted on its request, and
// partition its client. It never dials anything but its target, which must
// be a loopback address.
type Proxy struct {
	// Addr is the proxy's host:port on 127.0.0.1.
	Addr   string
	target string
	ln     net.Listener

	mu        sync.Mutex
	latency   func() time.Duration
	replyLat  func() time.Duration
	drops     int
	dropped   int
	hold      []byte        // a request chunk holding these bytes is held back
	holdFor   time.Duration // by this long
	held      chan struct{} // closed when the held chunk has been sent on
	cut       bool
	conns     map[net.Conn]struct{}
	closed    bool
	acceptors sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards to target.
func NewProxy(target string) (*Proxy, error) {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, errors.New("fleetsim: proxy target " + target + " is not a loopback address")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.acceptors.Add(1)
	go p.accept()
	return p, nil
}

// SetLatency delays each request (its first chunk after a reply) by
// requests() and every reply chunk by replies() (nil: no delay), so that a request reaches the server late
// or its reply comes back late. A delay longer than the client's operation
// timeout is a stall.
func (p *Proxy) SetLatency(requests, replies func() time.Duration) {
	p.mu.Lock()
	p.latency, p.replyLat = requests, replies
	p.mu.Unlock()
}

// HoldBack holds the next request chunk that contains match back for d
// before sending it on, even when the client has given up on it and
// closed its connection meanwhile: a request that reaches the server
// after the client's later ones, as one stalled on a connection while the
// next went through another does. The returned channel is closed when the
// chunk has been sent on to the server.
func (p *Proxy) HoldBack(match []byte, d time.Duration) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold, p.holdFor, p.held = bytes.Clone(match), d, make(chan struct{})
	return p.held
}

// holdBack holds chunk back when it is the one HoldBack waits for, and
// returns the channel to close once it has been sent on (nil otherwise).
func (p *Proxy) holdBack(chunk []byte) chan struct{} {
	p.mu.Lock()
	if p.hold == nil || !bytes.Contains(chunk, p.hold) {
		p.mu.Unlock()
		return nil
	}
	d, held := p.holdFor, p.held
	p.hold = nil
	p.mu.Unlock()
	time.Sleep(d)
	return held
}

// DropReplies makes the next n replies vanish: the request reaches the
// server, which acts on it; the reply is discarded and the connection
// closed, as when a network fails between the two.
func (p *Proxy) DropReplies(n int) {
	p.mu.Lock()
	p.drops = n
	p.mu.Unlock()
}

// Dropped returns how many replies were dropped.
func (p *Proxy) Dropped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// Partition cuts the client off: open connections are closed and new ones
// closed at once. Heal undoes it.
func (p *Proxy) Partition() {
	p.mu.Lock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

// Heal ends a partition.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.acceptors.Wait()
	return err
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.cut {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	defer p.acceptors.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *Proxy) serve(c net.Conn) {
	s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, s) {
		c.Close()
		s.Close()
		return
	}
	defer p.untrack(c, s)
	var replied atomic.Bool // a reply came since the last request chunk
	replied.Store(true)
	go func() {
		defer p.untrack(c, s)
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				if replied.Swap(false) { // a new request: delay it once
					p.delay(false)
				}
				held := p.holdBack(buf[:n])
				_, werr := s.Write(buf[:n])
				if held != nil {
					close(held)
				}
				if werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		replied.Store(true)
		if n > 0 && !p.reply(c, buf[:n]) {
			return
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) delay(reply bool) {
	p.mu.Lock()
	lat := p.latency
	if reply {
		lat = p.replyLat
	}
	p.mu.Unlock()
	if lat != nil {
		time.Sleep(lat())
	}
}

// reply forwards one reply chunk, delayed or dropped; false ends the
// connection.
func (p *Proxy) reply(c net.Conn, b []byte) bool {
	p.mu.Lock()
	drop := p.drops > 0
	if drop {
		p.drops--
		p.dropped++
	}
	p.mu.Unlock()
	if drop {
		return false
	}
	p.delay(true)
	_, err := c.Write(b)
	return err == nil
}
