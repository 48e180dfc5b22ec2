package serverset

import (
	"io"
	"net"
	"sync"
	"testing"
)

// partition is a loopback TCP proxy that the test can cut, so a client
// loses its server while the server keeps running (and expires the
// session), which stopping the server cannot do.
type partition struct {
	ln      net.Listener
	backend string
	mu      sync.Mutex
	cut     bool
	conns   []net.Conn
}

func newPartition(t *testing.T, backend string) *partition {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &partition{ln: ln, backend: backend}
	t.Cleanup(func() { ln.Close(); p.Cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			b, err := net.Dial("tcp", backend)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, b)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(b, c); b.Close() }()
			go func() { _, _ = io.Copy(c, b); c.Close() }()
		}
	}()
	return p
}

func (p *partition) Addr() string { return p.ln.Addr().String() }

// Cut drops every connection and refuses new ones.
func (p *partition) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Heal lets connections through again.
func (p *partition) Heal() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}
