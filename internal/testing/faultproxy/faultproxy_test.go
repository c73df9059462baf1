package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// echo is a loopback line server that answers each line with itself and
// records the lines it received.
type echo struct {
	ln    net.Listener
	mu    sync.Mutex
	lines []string
}

func newEcho(t *testing.T) *echo {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					e.mu.Lock()
					e.lines = append(e.lines, strings.TrimSuffix(l, "\n"))
					e.mu.Unlock()
					if _, err := io.WriteString(c, l); err != nil {
						return
					}
				}
			}()
		}
	}()
	return e
}

func (e *echo) received() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.lines...)
}

func dial(t *testing.T, p *Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, line string) (string, error) {
	t.Helper()
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatal(err)
	}
	got, err := r.ReadString('\n')
	return strings.TrimSuffix(got, "\n"), err
}

func TestPassThrough(t *testing.T) {
	e := newEcho(t)
	p, err := New(e.ln.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, r := dial(t, p)
	for _, want := range []string{"one", "two"} {
		if got, err := roundTrip(t, c, r, want); got != want || err != nil {
			t.Errorf("round trip %q = %q, %v", want, got, err)
		}
	}
}

// TestDropReplyAfter: the request reaches the server once, its reply is
// lost and the connection closed; the next connection works.
func TestDropReplyAfter(t *testing.T) {
	e := newEcho(t)
	hook, dropped := DropReplyAfter([]byte("SET"), 1)
	p, err := New(e.ln.Addr().String(), hook)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, r := dial(t, p)
	if got, err := roundTrip(t, c, r, "GET a"); got != "GET a" || err != nil {
		t.Fatalf("GET = %q, %v", got, err)
	}
	if got, err := roundTrip(t, c, r, "SET a"); !errors.Is(err, io.EOF) {
		t.Errorf("SET = %q, %v; want the reply lost (EOF)", got, err)
	}
	if n := dropped(); n != 1 {
		t.Errorf("dropped %d replies, want 1", n)
	}
	c2, r2 := dial(t, p)
	if got, err := roundTrip(t, c2, r2, "SET b"); got != "SET b" || err != nil {
		t.Errorf("SET on a new connection = %q, %v; want it answered (one reply dropped in all)", got, err)
	}
	if got, want := strings.Join(e.received(), ","), "GET a,SET a,SET b"; got != want {
		t.Errorf("server received %s, want %s", got, want)
	}
}

// TestDuplicate: a hook that sends each request twice makes the server
// see and answer it twice.
func TestDuplicate(t *testing.T) {
	e := newEcho(t)
	p, err := New(e.ln.Addr().String(), func(_ int, dir Dir, _ []byte) Verdict { return Verdict{Duplicate: dir == ToServer} })
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, r := dial(t, p)
	if got, err := roundTrip(t, c, r, "INCR"); got != "INCR" || err != nil {
		t.Fatalf("INCR = %q, %v", got, err)
	}
	if got, err := r.ReadString('\n'); got != "INCR\n" || err != nil {
		t.Fatalf("second answer = %q, %v; want the duplicate's", got, err)
	}
	if got := len(e.received()); got != 2 {
		t.Errorf("server received %d requests, want 2 (one sent, duplicated)", got)
	}
}

// TestPartition: bytes sent while partitioned are held, and delivered
// after Heal.
func TestPartition(t *testing.T) {
	e := newEcho(t)
	p, err := New(e.ln.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, r := dial(t, p)
	if got, err := roundTrip(t, c, r, "before"); got != "before" || err != nil {
		t.Fatalf("before = %q, %v", got, err)
	}
	p.Partition()
	if _, err := io.WriteString(c, "held\n"); err != nil {
		t.Fatal(err)
	}
	if got := e.received(); len(got) != 1 {
		t.Errorf("server received %q while partitioned, want only the request before", got)
	}
	p.Heal()
	if got, err := r.ReadString('\n'); got != "held\n" || err != nil {
		t.Errorf("after Heal = %q, %v; want the held request answered", got, err)
	}
}

func TestNewRejectsEmptyUpstream(t *testing.T) {
	if _, err := New("", nil); err == nil || !strings.Contains(err.Error(), "upstream") {
		t.Errorf("New(\"\") = %v, want an error naming the upstream address", err)
	}
}
