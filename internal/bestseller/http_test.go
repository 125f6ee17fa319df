package bestseller

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/server"
)

func newApp(t *testing.T, f *fixture) *fiber.App {
	t.Helper()
	return server.New(server.Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Redis: f.r.Client, DB: f.db.Pool,
		Registry: prometheus.NewRegistry(), BodyLimit: 1 << 16, Mount: []func(fiber.Router){f.s.Routes}})
}

func TestBestSellersOverHTTP(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.product(t, "a")
	f.product(t, "b")
	mustApply(t, f.s.Record, ord("1", fixedNow, Line{"b", 2}, Line{"a", 2}), ord("2", day(-40), Line{"c", 9}))
	app := newApp(t, f)

	r := openapitest.Do(t, app, http.MethodGet, "/api/v1/best-sellers", "", "")
	var b Board
	if err := json.Unmarshal(r.Body, &b); err != nil || r.Status != 200 || b.Period != Day || len(b.Items) != 2 ||
		b.Items[0] != (Entry{1, "a", "Name of a", 2}) || b.Items[1] != (Entry{2, "b", "Name of b", 2}) {
		t.Fatalf("day: %d %s", r.Status, r.Body)
	}
	r = openapitest.Do(t, app, http.MethodGet, "/api/v1/best-sellers?period=all&limit=1", "", "")
	if err := json.Unmarshal(r.Body, &b); err != nil || b.Period != All || len(b.Items) != 1 || b.Items[0].SKU != "c" {
		t.Fatalf("all: %s", r.Body)
	}
	if r := openapitest.Do(t, app, http.MethodGet, "/api/v1/best-sellers?period=week&limit=100", "", ""); r.Status != 200 {
		t.Fatalf("week: %d", r.Status)
	}
	r = openapitest.Do(t, app, http.MethodGet, "/api/v1/best-sellers/b?around=25", "", "")
	var p Position
	if err := json.Unmarshal(r.Body, &p); err != nil || r.Status != 200 || p.Rank != 2 || p.Units != 2 ||
		len(p.Above) != 1 || len(p.Below) != 0 || p.Above[0].SKU != "a" {
		t.Fatalf("position: %d %s", r.Status, r.Body)
	}
	for _, path := range []string{"/api/v1/best-sellers/c", "/api/v1/best-sellers/nope?period=all", "/api/v1/best-sellers/a%20b"} {
		openapitest.WantProblem(t, openapitest.Do(t, app, http.MethodGet, path, "", ""), http.StatusNotFound, "not_found")
	}
	for _, path := range []string{
		"/api/v1/best-sellers?period=year",
		"/api/v1/best-sellers?period=DAY",
		"/api/v1/best-sellers?limit=0",
		"/api/v1/best-sellers?limit=101",
		"/api/v1/best-sellers?limit=ten",
		"/api/v1/best-sellers?limit=-1",
		"/api/v1/best-sellers?limit=99999999999999999999",
		"/api/v1/best-sellers/a?period=hour",
		"/api/v1/best-sellers/a?around=26",
		"/api/v1/best-sellers/a?around=-1",
		"/api/v1/best-sellers/a?around=1.5",
		"/api/v1/best-sellers/nope?around=x", // a bad parameter outranks the missing SKU
	} {
		openapitest.WantProblem(t, openapitest.Do(t, app, http.MethodGet, path, "", ""), http.StatusBadRequest, "invalid_request")
	}
}
