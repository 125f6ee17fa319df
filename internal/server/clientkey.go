package server

import "github.com/gofiber/fiber/v2"

// ClientIP returns the function that names a request's client for per-IP
// limits, given the trusted proxies and the IPv6 prefix length of the
// configuration: the limiter's key (an IPv6 client is its /v6bits
// network). Features that count clients by address (unique visitors) use
// it, so that they see the client exactly as the limiter does.
func ClientIP(trustedProxies []string, v6bits int) func(*fiber.Ctx) string {
	return newClients(trustedProxies, v6bits).key
}
