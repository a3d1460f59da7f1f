package faultproxy

import (
	"io"
	"net"
	"sync"
)

// TCP is a loopback TCP forwarder whose upstream can be taken away and replaced while its own listener stays open:
// a server's outage and restart as its clients see them, without ever giving up the port they dial.
type TCP struct {
	// Addr is the forwarder's address (127.0.0.1:port).
	Addr string

	l        net.Listener
	mu       sync.Mutex
	upstream string // "" while down
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

// NewTCP listens on a loopback port and forwards every connection to upstream ("" starts it down).
func NewTCP(upstream string) (*TCP, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := &TCP{Addr: l.Addr().String(), l: l, upstream: upstream, conns: map[net.Conn]struct{}{}}
	t.wg.Add(1)
	go t.serve()
	return t, nil
}

// SetUpstream points new connections at addr. Live connections are cut either way; with "" new connections are
// closed as soon as they are accepted (the server is down).
func (t *TCP) SetUpstream(addr string) {
	t.mu.Lock()
	t.upstream = addr
	for c := range t.conns {
		_ = c.Close()
	}
	clear(t.conns)
	t.mu.Unlock()
}

// Close stops listening and cuts every connection.
func (t *TCP) Close() error {
	err := t.l.Close()
	t.SetUpstream("")
	t.wg.Wait()
	return err
}

func (t *TCP) serve() {
	defer t.wg.Done()
	for {
		c, err := t.l.Accept()
		if err != nil {
			return
		}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			t.forward(c)
		}()
	}
}

func (t *TCP) forward(c net.Conn) {
	t.mu.Lock()
	addr := t.upstream
	t.mu.Unlock()
	if addr == "" {
		_ = c.Close()
		return
	}
	u, err := net.Dial("tcp", addr)
	if err != nil {
		_ = c.Close()
		return
	}
	t.mu.Lock()
	if t.upstream != addr { // replaced while dialling
		t.mu.Unlock()
		_, _ = c.Close(), u.Close()
		return
	}
	t.conns[c], t.conns[u] = struct{}{}, struct{}{}
	t.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		_, _ = dst.Close(), src.Close()
		done <- struct{}{}
	}
	go pipe(u, c)
	go pipe(c, u)
	<-done
	<-done
	t.mu.Lock()
	delete(t.conns, c)
	delete(t.conns, u)
	t.mu.Unlock()
}
