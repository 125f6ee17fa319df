package server

import (
	"bytes"
	"net/netip"

	"github.com/gofiber/fiber/v2"
)

// defaultIPv6Prefix is how many leading bits of an IPv6 address name one
// client when Deps leaves it unset: a /64 is what one customer line or host
// usually gets, and it holds 2^64 addresses to rotate through.
const defaultIPv6Prefix = 64

// clients names the client of a request, for the per-IP limiter and the
// access log alike, so the log shows the address that was limited.
type clients struct {
	trusted []netip.Prefix
	// v6bits is the IPv6 prefix length that shares one limiter window.
	v6bits int
	// local names the request local addr keeps its answer in: one per
	// newClients, so that clients of other settings (ClientIP's) never
	// take this one's answer.
	local clientAddrKey
}

func newClients(trusted []string, v6bits int) clients {
	if v6bits < 1 || v6bits > 128 {
		v6bits = defaultIPv6Prefix
	}
	return clients{trusted: parsePrefixes(trusted), v6bits: v6bits, local: clientAddrKey{new(byte)}}
}

// addr is the client's address.
//
// The socket peer is the client unless the peer is a trusted proxy. Then
// X-Forwarded-For is read from the right: each proxy appends the address it
// received from, so the rightmost address that is not itself a trusted proxy
// is the first one no proxy of ours vouches for. The leftmost address, which
// Fiber's c.IP() returns, is whatever the client chose to write, so it is
// never used. IPv4-mapped IPv6 addresses count as the IPv4 address.
//
// The answer is kept in the request's locals: the limiter and the access
// log both ask, and reading the header twice was 2 % of a product read.
func (k clients) addr(c *fiber.Ctx) netip.Addr {
	if a, ok := c.Locals(k.local).(netip.Addr); ok {
		return a
	}
	a := k.resolve(c)
	c.Locals(k.local, a)
	return a
}

// clientAddrKey is the key of a request local addr keeps its answer in.
type clientAddrKey struct{ id *byte }

// resolve is addr's answer, from the peer and the header.
func (k clients) resolve(c *fiber.Ctx) netip.Addr {
	peer := normalizeAddr(peerAddr(c))
	if len(k.trusted) == 0 || !k.isTrusted(peer) {
		return peer
	}
	hops := forwardedFor(c)
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(hops[i])
		if err != nil {
			return peer // a garbled chain: trust only what we saw
		}
		if a = normalizeAddr(a); !k.isTrusted(a) {
			return a
		}
	}
	return peer
}

// key is the limiter's name for the client: its IPv4 address, or the IPv6
// prefix it belongs to, so that one host cannot get a fresh window for each
// of the addresses of its /64.
func (k clients) key(c *fiber.Ctx) string {
	a := k.addr(c)
	if !a.Is6() || k.v6bits == 128 {
		return a.String()
	}
	p, err := a.Prefix(k.v6bits)
	if err != nil {
		return a.String() // cannot happen: v6bits is within 1..128
	}
	return p.String()
}

// forwardedFor returns every element of every X-Forwarded-For line in
// order. Several lines of a list header are one comma-joined list (RFC 9110
// §5.3): a proxy that adds its own line instead of appending to the
// client's must not hide the client's line from us, nor ours from the
// client's. Empty elements are skipped, as §5.6.1 asks.
//
// PeekAll finds the lines by fasthttp's normalised header name (the
// server keeps header names normalised: Fiber's DisableHeaderNormalizing
// is off), without walking every header of the request.
func forwardedFor(c *fiber.Ctx) []string {
	var hops []string
	for _, line := range c.Request().Header.PeekAll(fiber.HeaderXForwardedFor) {
		for len(line) > 0 {
			var h []byte
			h, line, _ = bytes.Cut(line, []byte{','})
			if h = bytes.TrimSpace(h); len(h) > 0 {
				hops = append(hops, string(h))
			}
		}
	}
	return hops
}

// peerAddr is the socket peer's address (0.0.0.0 for in-memory connections).
func peerAddr(c *fiber.Ctx) netip.Addr {
	a, ok := netip.AddrFromSlice(c.Context().RemoteIP())
	if !ok {
		return netip.IPv4Unspecified()
	}
	return a
}

// normalizeAddr unmaps IPv4-mapped IPv6 addresses and drops zones, so one
// client has one spelling.
func normalizeAddr(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

func (k clients) isTrusted(a netip.Addr) bool {
	for _, p := range k.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parsePrefixes reads IPs and CIDRs (already validated by config).
func parsePrefixes(list []string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range list {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, unmapPrefix(p))
		} else if a, err := netip.ParseAddr(s); err == nil {
			a = normalizeAddr(a)
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return out
}

// unmapPrefix turns ::ffff:10.0.0.0/104 into 10.0.0.0/8, since addresses
// are compared unmapped.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	a := p.Addr()
	if a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96).Masked()
	}
	return p.Masked()
}
