package server

import (
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
)

// observe logs one line per request and records the HTTP metrics. The
// line's ip is the client address the limiter counts (clients.addr), not
// Fiber's c.IP(), which behind a proxy is the client's own claim. It runs
// the error handler itself, so the line and the metrics carry the status the
// client really receives; it then returns nil so the error is not handled
// twice.
func observe(log *slog.Logger, m *httpMetrics, who clients, onError fiber.ErrorHandler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		start := time.Now()
		if err := c.Next(); err != nil {
			if herr := onError(c, err); herr != nil {
				log.Error("error handler failed", "err", herr)
				c.Status(fiber.StatusInternalServerError)
			}
		}
		elapsed := time.Since(start)
		status := c.Response().StatusCode()
		route := routeLabel(c, status)
		m.observe(methodLabel(c.Method()), route, status, elapsed)
		log.LogAttrs(c.UserContext(), slog.LevelInfo, "request",
			slog.String("method", c.Method()),
			slog.String("route", route),
			slog.String("path", c.Path()),
			slog.Int("status", status),
			slog.Duration("latency", elapsed),
			slog.String("ip", who.addr(c).String()),
			slog.String("request_id", c.GetRespHeader(HeaderRequestID)),
		)
		return nil
	}
}

// routeLabel is the route template ("/api/v1/products/:sku"), never the raw
// path, so metric label values stay few. Requests that matched no route
// share one label.
func routeLabel(c *fiber.Ctx, status int) string {
	r := c.Route()
	if r == nil || r.Method == "USE" || (status == fiber.StatusNotFound && r.Path == "/") ||
		status == fiber.StatusMethodNotAllowed {
		return "unmatched"
	}
	return r.Path
}

func statusLabel(status int) string { return strconv.Itoa(status) }

// methodLabel returns a constant string for the method. Fiber's c.Method()
// aliases the request buffer, which is reused for the next request: kept
// as a label value it would later read "POS" or "GETT" (seen in tests).
// Constants also bound the label's values.
func methodLabel(m string) string {
	if i := slices.Index(labelledMethods, m); i >= 0 {
		return labelledMethods[i]
	}
	return "OTHER"
}

var labelledMethods = []string{fiber.MethodGet, fiber.MethodHead, fiber.MethodPost, fiber.MethodPut,
	fiber.MethodPatch, fiber.MethodDelete, fiber.MethodOptions}
