package testenv

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shop-oss/shop/internal/database"
)

// Proxy is a TCP proxy between the code under test and a real server, which
// a test can break the ways networks break, without touching the shared
// server: Down refuses and drops every connection (an outage), Blackhole
// lets requests through but loses the answers (a one-way failure, so the
// client cannot know whether its command ran), Stall stops forwarding in
// both directions but keeps every connection open (a hung server or
// network: what was sent waits, and arrives when the stall ends).
type Proxy struct {
	target string
	addr   string

	mu        sync.Mutex
	ln        net.Listener
	conns     map[net.Conn]struct{}
	blackhole bool
	stalled   chan struct{} // non-nil while stalled; closed when it ends
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
	go func() { p.copy(s, c, false); s.Close() }()
	p.copy(c, s, true)
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

// copy forwards src to dst until either fails; answers (from the server)
// are lost while the proxy is a blackhole. During a stall nothing is read,
// so the bytes wait in the kernel's buffers, even after their sender has
// closed its end, and are delivered when the stall ends.
func (p *Proxy) copy(dst, src net.Conn, answers bool) {
	buf := make([]byte, 32<<10)
	for {
		p.waitStall()
		n, err := src.Read(buf)
		p.waitStall()
		if n > 0 && !(answers && p.swallowing()) {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) swallowing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blackhole
}

func (p *Proxy) waitStall() {
	p.mu.Lock()
	ch := p.stalled
	p.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// Stall stops forwarding in both directions, keeping connections open,
// and accepts new connections without forwarding on them either, as a
// hung server does. Stall(false) delivers whatever waited and forwards
// again. Down ends a stall too.
func (p *Proxy) Stall(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && p.stalled == nil:
		p.stalled = make(chan struct{})
	case !on && p.stalled != nil:
		close(p.stalled)
		p.stalled = nil
	}
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
	p.Stall(false)
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

// NewProxiedDatabase is a fresh test database opened as `shop serve` opens
// one (database.OpenPostgres), through a proxy the test can break.
func NewProxiedDatabase(t testing.TB) (*pgxpool.Pool, *Proxy) {
	t.Helper()
	d := NewDatabase(t)
	cfg, err := pgxpool.ParseConfig(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	target := net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
	proxy := NewProxy(t, target)
	pool, err := database.OpenPostgres(context.Background(), strings.Replace(d.URL, target, proxy.Addr(), 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, proxy
}
