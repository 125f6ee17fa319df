package server

import (
	"net/netip"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// clientIP names the client of a request for per-IP limits.
//
// The socket peer is the client unless the peer is a trusted proxy (Fiber's
// trusted-proxy check). Then X-Forwarded-For is read from the right: each
// proxy appends the address it received from, so the rightmost address that
// is not itself a trusted proxy is the first one no proxy of ours vouches
// for. The leftmost address, which Fiber's c.IP() returns, is whatever the
// client chose to write, so it is never used.
func clientIP(trusted []netip.Prefix) func(*fiber.Ctx) string {
	return func(c *fiber.Ctx) string {
		peer := c.Context().RemoteIP().String()
		if len(trusted) == 0 || !c.IsProxyTrusted() {
			return peer
		}
		hops := strings.Split(c.Get(fiber.HeaderXForwardedFor), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				return peer // a garbled chain: trust only what we saw
			}
			if !isTrusted(a.Unmap(), trusted) {
				return a.Unmap().String()
			}
		}
		return peer
	}
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
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
			out = append(out, p.Masked())
		} else if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
		}
	}
	return out
}
