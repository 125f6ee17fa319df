package testenv

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy between the code under test and a real server, which
// a test can break the ways networks break, without touching the shared
// server: Down refuses and drops every connection (an outage), Blackhole
// lets requests through but loses the answers (a one-way failure, so the
// client cannot know whether its command ran).
type Proxy struct {
	target string
	addr   string

	mu        sync.Mutex
	ln        net.Listener
	conns     map[net.Conn]struct{}
	blackhole bool
}

// NewProxy listens on a free loopback port and forwards to target
// (host:port). It is closed when t ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	t.Cleanup(p.Down)
	return p
}

// Addr is the proxy's host:port, for the client under test.
func (p *Proxy) Addr() string { return p.addr }

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *Proxy) pipe(c net.Conn) {
	s, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	p.mu.Unlock()
	go func() { _, _ = io.Copy(s, c); s.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 && !p.swallowing() {
			if _, werr := c.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

func (p *Proxy) swallowing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blackhole
}

// Blackhole starts losing every answer from the server; requests still
// reach it. Blackhole(false) ends that and resets every open connection,
// whose streams have lost bytes; new connections work again.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackhole = on
	if !on {
		p.closeAll()
	}
}

// Down closes the listener and every connection: connections are reset
// and new ones refused until Up.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	p.closeAll()
}

func (p *Proxy) closeAll() {
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Up listens again on the same address after Down.
func (p *Proxy) Up(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	p.serve(ln)
}
