package server_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
)

// listen serves app on a loopback port and returns the address.
func listen(t *testing.T, app *fiber.App) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.ShutdownWithTimeout(5 * time.Second) })
	return ln.Addr().String()
}

// writeThenRead is the simplest HTTP/1.1 client (Python's http.client is
// one): it writes the whole request, failing on a write error, then reads
// the answer.
func writeThenRead(t *testing.T, addr string, req []byte) (*http.Response, error) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := conn.Write(req); err != nil {
		return nil, fmt.Errorf("write: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, err
}

func postWithBody(path string, n int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: shop\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, n)
	b.Write(bytes.Repeat([]byte("x"), n))
	return b.Bytes()
}
