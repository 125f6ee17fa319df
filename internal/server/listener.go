package server

import (
	"io"
	"net"
	"sync"
	"time"
)

// Bounds on what a closing connection still reads from its client: enough
// for the 5 MB upload of a client that ignores the early answer, at loopback
// speed a few milliseconds of CPU; past them the connection is closed at once.
const (
	lingerTimeout  = 5 * time.Second
	lingerMaxBytes = 16 << 20
)

// Listener wraps ln so that closing a connection never resets it under a
// client that is still sending.
//
// fasthttp answers a body over the limit (413), oversized headers (431) or
// a malformed request (400) as soon as it sees them and closes the
// connection, leaving the rest of the request unread. Closing a TCP socket
// with unread data sends a reset instead of a FIN, and on loopback the
// reset can overtake the answer or break the client's write before it reads
// the answer: the client sees "connection reset by peer" instead of its 413.
// So a connection's Close half-closes it (FIN after the answer), then reads
// and discards what the client still sends, within lingerTimeout and
// lingerMaxBytes, in the background, before closing for good: net/http's
// closeWriteAndWait does the same.
func Listener(ln net.Listener) net.Listener { return lingerListener{ln} }

type lingerListener struct{ net.Listener }

func (l lingerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		return &lingerConn{TCPConn: tc}, nil
	}
	return c, nil
}

// lingerConn is a TCP connection whose Close lingers (see Listener).
type lingerConn struct {
	*net.TCPConn
	once sync.Once
}

// Close half-closes the connection and lets a goroutine drain and close it.
// It returns at once, so fasthttp's worker is free.
func (c *lingerConn) Close() error {
	c.once.Do(func() {
		if err := c.CloseWrite(); err != nil {
			_ = c.TCPConn.Close()
			return
		}
		go c.drain()
	})
	return nil
}

func (c *lingerConn) drain() {
	defer c.TCPConn.Close()
	if err := c.SetReadDeadline(time.Now().Add(lingerTimeout)); err != nil {
		return
	}
	_, _ = io.CopyN(io.Discard, c.TCPConn, lingerMaxBytes)
}
