package pgtest

import (
	"net"
	"strconv"
	"sync"
)

// Proxy is a loopback TCP proxy in front of a server, for partition tests:
// while partitioned it holds every byte in both directions and dials
// nothing for new connections (the kernel still accepts them), as a network
// that silently drops packets would; Heal lets the held bytes through,
// late, as TCP retransmission would.
type Proxy struct {
	// URL is the server's URL with the proxy's port.
	URL string

	ln       net.Listener
	upstream string
	mu       sync.Mutex
	cond     *sync.Cond
	cut      bool
	closed   bool
	conns    []net.Conn
}

// NewProxy starts a proxy to s on a free loopback port.
func NewProxy(s *Server) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, upstream: "127.0.0.1:" + strconv.Itoa(s.Port)}
	p.cond = sync.NewCond(&p.mu)
	port := ln.Addr().(*net.TCPAddr).Port
	p.URL = "postgres://postgres@127.0.0.1:" + strconv.Itoa(port) + "/postgres?sslmode=disable"
	go p.accept()
	return p, nil
}

// Partition starts holding traffic.
func (p *Proxy) Partition() { p.set(true) }

// Heal lets traffic through again.
func (p *Proxy) Heal() { p.set(false) }

func (p *Proxy) set(cut bool) {
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

// Close stops the proxy and closes every connection through it.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	p.cond.Broadcast()
	for _, c := range conns {
		c.Close()
	}
	return p.ln.Close()
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
		go p.serve(c)
	}
}

func (p *Proxy) serve(c net.Conn) {
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
	go func() { p.pipe(u, c); done <- struct{}{} }()
	go func() { p.pipe(c, u); done <- struct{}{} }()
	<-done
}

// pipe copies src to dst, holding each chunk while partitioned.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
