// Package faultproxy is a small loopback TCP proxy for fault-injection
// tests: every chunk of bytes that crosses it, in either direction, goes
// through a hook that can let it pass, delay it, drop it, send it twice or
// close the connection, and the whole proxy can be partitioned (bytes held
// in both directions) and healed.
//
// The canonical use is a lost reply: a hook lets a request reach the
// server, drops the server's reply and closes the client's connection, so
// that the server has applied the request and the client, seeing only a
// broken connection, may send it again (see DropReplyAfter).
package faultproxy

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"time"
)

// Dir is the direction a chunk travels.
type Dir int

const (
	// ToServer is a chunk from the client to the server.
	ToServer Dir = iota
	// ToClient is a chunk from the server to the client.
	ToClient
)

// Verdict is what a hook decides for one chunk. The zero Verdict lets the
// chunk through unchanged.
type Verdict struct {
	// Delay holds the chunk (and every later chunk of the same direction
	// on the connection) this long before forwarding it.
	Delay time.Duration
	// Drop discards the chunk.
	Drop bool
	// Duplicate forwards the chunk twice.
	Duplicate bool
	// Close closes both sides of the connection after the chunk was
	// handled (forwarded, or dropped).
	Close bool
}

// Hook decides the fate of one chunk. conn numbers the proxy's client
// connections from 1 in order of acceptance. A hook is called from the
// connection's goroutines, concurrently for different connections and
// directions, and must be safe for that.
type Hook func(conn int, dir Dir, chunk []byte) Verdict

// Proxy is a running proxy.
type Proxy struct {
	ln       net.Listener
	upstream string

	mu     sync.Mutex
	cond   *sync.Cond
	hook   Hook
	cut    bool
	closed bool
	n      int
	conns  []net.Conn
}

// New starts a proxy to upstream (host:port) on a free loopback port. A
// nil hook lets everything through.
func New(upstream string, hook Hook) (*Proxy, error) {
	if upstream == "" {
		return nil, errors.New("faultproxy: upstream address is empty")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, upstream: upstream, hook: hook}
	p.cond = sync.NewCond(&p.mu)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port, to give to the client instead of the
// server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetHook replaces the hook; nil lets everything through.
func (p *Proxy) SetHook(h Hook) {
	p.mu.Lock()
	p.hook = h
	p.mu.Unlock()
}

// Partition holds every byte in both directions, and dials nothing for
// new connections, until Heal, as a network that silently drops packets
// would (the kernel still accepts connections).
func (p *Proxy) Partition() { p.setCut(true) }

// Heal lets held bytes through, late, as TCP retransmission would.
func (p *Proxy) Heal() { p.setCut(false) }

// CloseConns closes every open connection through the proxy, as a
// restarting server or a middlebox dropping its state would; the proxy
// keeps accepting new ones.
func (p *Proxy) CloseConns() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// Close stops the proxy and closes every connection through it.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cond.Broadcast()
	p.CloseConns()
	return p.ln.Close()
}

func (p *Proxy) setCut(cut bool) {
	p.mu.Lock()
	p.cut = cut
	p.mu.Unlock()
	p.cond.Broadcast()
}

// wait blocks while the proxy is partitioned; it reports false once the
// proxy is closed.
func (p *Proxy) wait() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.cut && !p.closed {
		p.cond.Wait()
	}
	return !p.closed
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.mu.Lock()
		p.n++
		n := p.n
		p.mu.Unlock()
		go p.serve(n, c)
	}
}

func (p *Proxy) serve(n int, c net.Conn) {
	defer c.Close()
	if !p.wait() {
		return
	}
	u, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	if !p.track(u) {
		return
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	go func() { p.pipe(n, ToServer, u, c); done <- struct{}{} }()
	go func() { p.pipe(n, ToClient, c, u); done <- struct{}{} }()
	<-done
}

// pipe copies src to dst through the hook. Closing either side ends both
// pipes of the connection.
func (p *Proxy) pipe(n int, dir Dir, dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 64<<10)
	for {
		k, err := src.Read(buf)
		if k > 0 {
			if !p.wait() {
				return
			}
			p.mu.Lock()
			h := p.hook
			p.mu.Unlock()
			var v Verdict
			if h != nil {
				v = h(n, dir, buf[:k])
			}
			if v.Delay > 0 {
				time.Sleep(v.Delay)
			}
			if !v.Drop {
				times := 1
				if v.Duplicate {
					times = 2
				}
				for range times {
					if _, werr := dst.Write(buf[:k]); werr != nil {
						return
					}
				}
			}
			if v.Close {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// DropReplyAfter returns a hook, and a counter of the replies it dropped,
// that lets through every request and, for the next n requests containing
// match (a chunk toward the server), forwards the request, drops the
// server's reply to it and closes that client connection: the server
// applied the request and the client cannot know it. A request split over
// several chunks is matched only if one chunk holds match.
func DropReplyAfter(match []byte, n int) (Hook, func() int) {
	var mu sync.Mutex
	armed := map[int]bool{} // connections whose next reply is to be dropped
	dropped := 0
	hook := func(conn int, dir Dir, chunk []byte) Verdict {
		mu.Lock()
		defer mu.Unlock()
		switch dir {
		case ToServer:
			if n > 0 && bytes.Contains(chunk, match) {
				n--
				armed[conn] = true
			}
		case ToClient:
			if armed[conn] {
				delete(armed, conn)
				dropped++
				return Verdict{Drop: true, Close: true}
			}
		}
		return Verdict{}
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return dropped
	}
	return hook, count
}
