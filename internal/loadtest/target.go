package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// target is the server under test: its base URL and, for a loopback
// target, the one address every connection dials.
type target struct {
	base string // scheme://host:port, no trailing slash
	// dial, when set, is the resolved loopback address; connections go
	// there whatever the name resolves to later (no DNS rebinding).
	dial string
}

// resolveTarget parses raw and, unless allowRemote, insists that its host
// is a loopback address or a name that resolves only to loopback ones.
func resolveTarget(ctx context.Context, raw string, allowRemote bool) (target, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return target{}, fmt.Errorf("--target %q is not an http(s)://host:port URL", raw)
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		return target{}, fmt.Errorf("--target %q must be the server's base URL, without a path", raw)
	}
	t := target{base: u.Scheme + "://" + u.Host}
	if allowRemote {
		return t, nil
	}
	addr, err := loopbackAddr(ctx, u.Hostname())
	if err != nil {
		return target{}, err
	}
	t.dial = net.JoinHostPort(addr.String(), port(u))
	return t, nil
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// loopbackAddr resolves host and returns its first address, or an error
// when any address is not loopback.
func loopbackAddr(ctx context.Context, host string) (netip.Addr, error) {
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if addrs, err = net.DefaultResolver.LookupNetIP(rctx, "ip", host); err != nil {
			return netip.Addr{}, fmt.Errorf("--target host %s: %w", host, err)
		}
	}
	if len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("--target host %s has no address", host)
	}
	for _, a := range addrs {
		if !a.Unmap().IsLoopback() {
			return netip.Addr{}, fmt.Errorf("--target host %s: %s is %w; "+
				"load tests go to this machine only unless --allow-remote is given", host, a, errNotLoopback)
		}
	}
	return addrs[0].Unmap(), nil
}

// transport returns an HTTP transport for the target that keeps up to
// conns connections open, never uses a proxy (a proxy from the environment
// could send the load elsewhere), and dials the pinned address if any.
func (t target) transport(conns int) *http.Transport {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	dial := d.DialContext
	if t.dial != "" {
		dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, t.dial)
		}
	}
	return &http.Transport{
		Proxy:               nil,
		DialContext:         dial,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		IdleConnTimeout:     30 * time.Second,
		ForceAttemptHTTP2:   false,
	}
}

// url joins the base URL and an API path.
func (t target) url(path string) string {
	return t.base + "/" + strings.TrimPrefix(path, "/")
}

// errNotLoopback marks a refused target.
var errNotLoopback = errors.New("not a loopback address")
