package server

import "github.com/gofiber/fiber/v2"

// ClientIP returns the function that names a request's client for per-IP
// limits, given the trusted proxies of the configuration: the limiter's
// key. Features that count clients by address (unique visitors) use it, so
// that they see the client exactly as the limiter does.
func ClientIP(trustedProxies []string) func(*fiber.Ctx) string {
	return clientIP(parsePrefixes(trustedProxies))
}
