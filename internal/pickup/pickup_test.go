package pickup

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/lock"
	"github.com/shop-oss/shop/internal/openapitest"
	"github.com/shop-oss/shop/internal/racetest"
	"github.com/shop-oss/shop/internal/server"
	"github.com/shop-oss/shop/internal/testenv"
)

type fixture struct {
	s   *Service
	app *fiber.App
	r   *testenv.Redis
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := testenv.NewDatabase(t)
	r := testenv.NewRedis(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := New(db.Pool, r.Client, lock.New(r.Client, r.Prefix), r.Prefix, log)
	app := server.New(server.Deps{Log: log, Redis: r.Client, DB: db.Pool, Registry: prometheus.NewRegistry(), BodyLimit: 1 << 16,
		Mount: []func(fiber.Router){func(r fiber.Router) { s.Routes(r, adminOnly) }}})
	return &fixture{s: s, app: app, r: r}
}

func adminOnly(c *fiber.Ctx) error {
	if c.Get("X-Test-Role") != "admin" {
		return apperr.NewError(apperr.CodeUnauthorized, "no credentials")
	}
	return c.Next()
}

func (f *fixture) do(t *testing.T, method, path, body string) openapitest.Reply {
	t.Helper()
	return openapitest.Do(t, f.app, method, path, "", body, "X-Test-Role", "admin")
}

// Stores around Paris: Louvre, Notre-Dame (≈ 1.9 km away), La Défense
// (≈ 8 km), Versailles (≈ 17 km).
var paris = []Store{
	{"louvre", "Louvre", "Rue de Rivoli", 2.3376, 48.8606},
	{"notre-dame", "Notre-Dame", "", 2.3499, 48.8530},
	{"la-defense", "La Défense", "Parvis", 2.2380, 48.8920},
	{"versailles", "Versailles", "Place d'Armes\nVersailles", 2.1204, 48.8049},
}

func (f *fixture) put(t *testing.T, st Store) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"name": st.Name, "address": st.Address, "lng": st.Lng, "lat": st.Lat})
	if r := f.do(t, http.MethodPut, "/api/v1/admin/stores/"+st.ID, string(body)); r.Status != http.StatusOK {
		t.Fatalf("put %s: %d %s", st.ID, r.Status, r.Body)
	}
}

func (f *fixture) nearby(t *testing.T, query string) []Nearby {
	t.Helper()
	r := openapitest.Do(t, f.app, http.MethodGet, "/api/v1/stores/nearby?"+query, "", "")
	if r.Status != http.StatusOK {
		t.Fatalf("nearby %s: %d %s", query, r.Status, r.Body)
	}
	var out struct{ Items []Nearby }
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatal(err)
	}
	return out.Items
}

func ids(ns []Nearby) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.ID)
	}
	return out
}

const fromLouvre = "lng=2.3376&lat=48.8606"

func TestStoresNearestFirst(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, st := range paris {
		f.put(t, st)
	}
	got := f.nearby(t, fromLouvre)
	if !slices.Equal(ids(got), []string{"louvre", "notre-dame", "la-defense"}) {
		t.Fatalf("within 10 km: %v", ids(got))
	}
	if got[0].DistanceKm > 0.01 || got[1].DistanceKm < 1 || got[1].DistanceKm > 1.5 || got[1].Store != paris[1] {
		t.Fatalf("hits %+v", got)
	}
	if got := f.nearby(t, fromLouvre+"&radius_km=50&limit=2"); !slices.Equal(ids(got), []string{"louvre", "notre-dame"}) {
		t.Fatalf("limit 2: %v", ids(got))
	}
	if got := f.nearby(t, fromLouvre+"&radius_km=50"); len(got) != 4 || got[3].Store != paris[3] {
		t.Fatalf("within 50 km: %+v", got)
	}
	if got := f.nearby(t, "lng=-74&lat=40.7"); len(got) != 0 {
		t.Fatalf("New York: %v", ids(got))
	}

	// Replace, read back from PostgreSQL, delete.
	moved := Store{"louvre", "Louvre (moved)", "", 2.2950, 48.8740}
	f.put(t, moved)
	r := openapitest.Do(t, f.app, http.MethodGet, "/api/v1/stores/louvre", "", "")
	var st Store
	_ = json.Unmarshal(r.Body, &st)
	if r.Status != http.StatusOK || st != moved {
		t.Fatalf("get: %d %+v", r.Status, st)
	}
	if got := f.nearby(t, fromLouvre); got[0].ID != "notre-dame" || got[1].Store != moved {
		t.Fatalf("after the move: %+v", got)
	}
	if r := f.do(t, http.MethodDelete, "/api/v1/admin/stores/louvre", ""); r.Status != http.StatusNoContent {
		t.Fatalf("delete: %d", r.Status)
	}
	openapitest.WantProblem(t, f.do(t, http.MethodDelete, "/api/v1/admin/stores/louvre", ""), http.StatusNotFound, "not_found")
	openapitest.WantProblem(t, openapitest.Do(t, f.app, http.MethodGet, "/api/v1/stores/louvre", "", ""), http.StatusNotFound, "not_found")
	if got := f.nearby(t, fromLouvre); !slices.Equal(ids(got), []string{"notre-dame", "la-defense"}) {
		t.Fatalf("after delete: %v", ids(got))
	}
}

func TestStoresRefuseBadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for name, c := range map[string]struct{ id, body string }{
		"empty_body":     {"s1", ""},
		"not_an_object":  {"s1", `[1]`},
		"no_name":        {"s1", `{"lng":1,"lat":1}`},
		"blank_name":     {"s1", `{"name":"  ","lng":1,"lat":1}`},
		"long_name":      {"s1", fmt.Sprintf(`{"name":"%0201d","lng":1,"lat":1}`, 0)},
		"control_name":   {"s1", `{"name":"a\u0007","lng":1,"lat":1}`},
		"long_address":   {"s1", fmt.Sprintf(`{"name":"n","address":"%0501d","lng":1,"lat":1}`, 0)},
		"no_lng":         {"s1", `{"name":"n","lat":1}`},
		"lng_over":       {"s1", `{"name":"n","lng":180.0001,"lat":1}`},
		"lat_over":       {"s1", `{"name":"n","lng":1,"lat":85.06}`},
		"lat_under":      {"s1", `{"name":"n","lng":1,"lat":-90}`},
		"lng_a_string":   {"s1", `{"name":"n","lng":"1","lat":1}`},
		"lat_null":       {"s1", `{"name":"n","lng":1,"lat":null}`},
		"name_a_number":  {"s1", `{"name":5,"lng":1,"lat":1}`},
		"bad_id":         {"a%20b", `{"name":"n","lng":1,"lat":1}`},
		"long_id":        {fmt.Sprintf("%065d", 0), `{"name":"n","lng":1,"lat":1}`},
		"reserved_id":    {"nearby", `{"name":"n","lng":1,"lat":1}`},
		"trailing_data":  {"s1", `{"name":"n","lng":1,"lat":1} {}`},
		"everything_bad": {"a%20b", `{"name":"","lng":500,"lat":-500}`},
	} {
		r := f.do(t, http.MethodPut, "/api/v1/admin/stores/"+c.id, c.body)
		if r.Status != http.StatusBadRequest {
			t.Errorf("%s: %d %s", name, r.Status, r.Body)
		}
	}
	// Edges are accepted.
	f.put(t, Store{"edge", "Edge", "", -180, -85.05112878})
	f.put(t, Store{"edge2", "Edge", "", 180, 85.05112878})
	for name, q := range map[string]string{
		"no_point":       "",
		"no_lat":         "lng=1",
		"no_lng":         "lat=1",
		"lng_text":       "lng=east&lat=1",
		"lng_over":       "lng=181&lat=1",
		"lat_over":       "lng=1&lat=85.1",
		"lat_nan":        "lng=1&lat=NaN",
		"lng_inf":        "lng=Inf&lat=1",
		"radius_zero":    "lng=1&lat=1&radius_km=0",
		"radius_neg":     "lng=1&lat=1&radius_km=-1",
		"radius_over":    "lng=1&lat=1&radius_km=1000.5",
		"radius_text":    "lng=1&lat=1&radius_km=far",
		"limit_zero":     "lng=1&lat=1&limit=0",
		"limit_over":     "lng=1&lat=1&limit=51",
		"limit_fraction": "lng=1&lat=1&limit=1.5",
	} {
		r := openapitest.Do(t, f.app, http.MethodGet, "/api/v1/stores/nearby?"+q, "", "")
		openapitest.WantProblem(t, r, http.StatusBadRequest, "invalid_request")
		_ = name
	}
	if got := f.nearby(t, "lng=180&lat=85.05112878&radius_km=1000&limit=50"); len(got) != 1 {
		t.Fatalf("edge search: %v", ids(got))
	}
	openapitest.WantProblem(t, openapitest.Do(t, f.app, http.MethodGet, "/api/v1/stores/a%20b", "", ""), http.StatusNotFound, "not_found")
	openapitest.WantProblem(t, openapitest.Do(t, f.app, http.MethodPut, "/api/v1/admin/stores/s1", "", `{"name":"n","lng":1,"lat":1}`),
		http.StatusUnauthorized, "unauthorized")
}

// After Redis lost the index (a restart without persistence), a write
// must not pass one store for the whole index, and the next search
// rebuilds it from PostgreSQL.
func TestMissingIndexIsRebuilt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, st := range paris[:3] {
		f.put(t, st)
	}
	ctx := context.Background()
	f.r.Client.Del(ctx, f.s.indexKeys()...)
	f.put(t, paris[3])
	if got := f.nearby(t, fromLouvre+"&radius_km=50"); len(got) != 4 {
		t.Fatalf("after the loss: %v", ids(got))
	}
	// At start, a rebuild puts a drifted index right.
	f.r.Client.ZRem(ctx, f.s.indexKeys()[0], "louvre")
	if err := f.s.RebuildIndex(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.nearby(t, fromLouvre); len(got) != 3 || got[0].ID != "louvre" {
		t.Fatalf("after the rebuild: %v", ids(got))
	}
	// No stores at all: the empty index counts as built.
	for _, st := range paris {
		f.do(t, http.MethodDelete, "/api/v1/admin/stores/"+st.ID, "")
	}
	f.r.Client.Del(ctx, f.s.indexKeys()...)
	if got := f.nearby(t, fromLouvre); len(got) != 0 {
		t.Fatalf("no stores: %v", ids(got))
	}
	if built, _ := f.r.Client.HExists(ctx, f.s.indexKeys()[2], "built").Result(); !built {
		t.Fatal("empty index not marked built")
	}
}

// The lock only saves work: rebuilds at once, racing admin writes, leave
// the index exactly as PostgreSQL says.
func TestRebuildsAtOnceWithWritesStayExact(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	// A write between a rebuild's snapshot and its swap: the swap is
	// refused and the rebuild starts over.
	f.s.beforeSwap = func() {
		f.s.beforeSwap = nil
		f.put(t, paris[0])
	}
	if err := f.s.rebuild(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.nearby(t, fromLouvre); !slices.Equal(ids(got), []string{"louvre"}) {
		t.Fatalf("after a racing write: %v", ids(got))
	}

	rebuilders := racetest.Times(3, func(int) {
		for range 3 {
			if err := f.s.rebuild(ctx); err != nil && err != errRebuildRaced {
				t.Error(err)
			}
		}
	})
	writers := racetest.Times(2, func(w int) {
		for i := range 15 {
			st := Store{fmt.Sprintf("w%d-%d", w, i%5), "S", "", 2.3 + float64(i)/1000, 48.86}
			if i%4 == 3 {
				_ = f.s.Delete(ctx, st.ID)
			} else if _, err := f.s.Put(ctx, st); err != nil {
				t.Error(err)
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	racetest.Together(append(rebuilders, writers...)...)
	all, err := f.s.selectAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, st := range all {
		want = append(want, st.ID)
	}
	got := ids(f.nearby(t, "lng=2.3&lat=48.86&radius_km=100&limit=50"))
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("index %v, PostgreSQL %v", got, want)
	}
}

// A DELETE whose index step failed answers 503; its retry finds the row
// gone (404) and must still clear the index, or the store would stay in
// nearby results for good while GET says it does not exist. The first
// attempt is played here by deleting the row behind the service's back.
func TestDeleteRetryClearsTheIndex(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.put(t, paris[0])
	f.put(t, paris[1])
	if got := f.nearby(t, fromLouvre); len(got) != 2 { // builds the index
		t.Fatalf("nearby: %v", ids(got))
	}
	if _, err := f.s.db.Exec(context.Background(), `DELETE FROM stores WHERE id = 'louvre'`); err != nil {
		t.Fatal(err)
	}
	if r := f.do(t, http.MethodDelete, "/api/v1/admin/stores/louvre", ""); r.Status != http.StatusNotFound {
		t.Fatalf("retried delete: %d %s", r.Status, r.Body)
	}
	if got := f.nearby(t, fromLouvre); !slices.Equal(ids(got), []string{"notre-dame"}) {
		t.Fatalf("nearby after the retried delete: %v, want only notre-dame", ids(got))
	}
}

// The geo set, the info hash and the state are one index: losing any one
// of them (evicted, deleted by hand) while "built" stays makes the next
// search rebuild it, not answer an empty list for ever.
func TestIndexRebuiltWhenOneKeyIsLost(t *testing.T) {
	t.Parallel()
	for i, name := range []string{"geo", "info"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			for _, st := range paris[:3] {
				f.put(t, st)
			}
			ctx := context.Background()
			if got := f.nearby(t, fromLouvre); len(got) != 3 { // builds the index
				t.Fatalf("before: %v", ids(got))
			}
			f.r.Client.Del(ctx, f.s.indexKeys()[i])
			if got := f.nearby(t, fromLouvre); len(got) != 3 || got[0].Store != paris[0] {
				t.Fatalf("after losing %s: %+v", name, got)
			}
			// A write after a loss does not pass a partial index for a whole one.
			f.r.Client.Del(ctx, f.s.indexKeys()[i])
			f.put(t, paris[3])
			if got := f.nearby(t, fromLouvre+"&radius_km=50"); len(got) != 4 {
				t.Fatalf("write after losing %s: %v", name, ids(got))
			}
		})
	}
}

// GEOSEARCH does not look across ±180: a search near the antimeridian
// finds the stores on both sides of it, with their true distances, and
// so do searches at the poles' bounds.
func TestNearbyAcrossTheAntimeridian(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	stores := []Store{
		{"east", "East", "", 179.99, 0},
		{"west", "West", "", -179.995, 0},
		{"far-west", "Far west", "", -178, 0},
		{"north-east", "North east", "", 179.5, 85.05},
		{"north-west", "North west", "", -179.5, 85.05},
		{"south-west", "South west", "", -179.9, -85.05},
	}
	for _, st := range stores {
		f.put(t, st)
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"lng=180&lat=0&radius_km=5", []string{"west", "east"}},
		{"lng=-180&lat=0&radius_km=5", []string{"west", "east"}},
		{"lng=179.995&lat=0&radius_km=5", []string{"east", "west"}},
		{"lng=-179.995&lat=0&radius_km=5", []string{"west", "east"}},
		{"lng=179.99&lat=0&radius_km=300", []string{"east", "west", "far-west"}},
		{"lng=179.99&lat=0&radius_km=300&limit=2", []string{"east", "west"}},
		{"lng=179.9&lat=85.05112878&radius_km=50", []string{"north-east", "north-west"}},
		{"lng=-179.9&lat=-85.05112878&radius_km=50", []string{"south-west"}},
		{"lng=0&lat=0&radius_km=5", nil},
	} {
		got := f.nearby(t, tc.query)
		if !slices.Equal(ids(got), tc.want) {
			t.Errorf("%s: %v, want %v", tc.query, ids(got), tc.want)
		}
		for i := 1; i < len(got); i++ {
			if got[i].DistanceKm < got[i-1].DistanceKm {
				t.Errorf("%s: not nearest first: %+v", tc.query, got)
			}
		}
	}
	// The far side's distance is measured from the real centre: 0.005° and
	// 0.01° of longitude at the equator are about 0.556 and 1.113 km.
	got := f.nearby(t, "lng=180&lat=0&radius_km=5")
	for i, want := range []float64{0.556, 1.113} {
		if i >= len(got) || math.Abs(got[i].DistanceKm-want) > 0.01 {
			t.Errorf("distances from (180, 0): %+v, want %v km", got, want)
		}
	}
}

// Longitude 180 and -180 are one meridian: a store put on it is found
// from either side and from either spelling of it, also at the poles'
// bounds. Redis files a member at exactly 180 outside its geohash range,
// where only a search from exactly 180 finds it.
func TestNearbyStoresOnTheAntimeridian(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, st := range []Store{
		{"plus", "Plus", "", 180, 10},
		{"minus", "Minus", "", -180, -10},
		{"north", "North", "", 180, MaxLat},
		{"south", "South", "", -180, -MaxLat},
	} {
		f.put(t, st)
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"lng=179.99&lat=10&radius_km=5", []string{"plus"}},
		{"lng=-179.99&lat=10&radius_km=5", []string{"plus"}},
		{"lng=180&lat=10&radius_km=5", []string{"plus"}},
		{"lng=-180&lat=10&radius_km=5", []string{"plus"}},
		{"lng=179.99&lat=-10&radius_km=5", []string{"minus"}},
		{"lng=-179.99&lat=-10&radius_km=5", []string{"minus"}},
		{"lng=180&lat=-10&radius_km=5", []string{"minus"}},
		{"lng=179.9&lat=85.05112878&radius_km=5", []string{"north"}},
		{"lng=-179.9&lat=85.05112878&radius_km=5", []string{"north"}},
		{"lng=179.9&lat=-85.05112878&radius_km=5", []string{"south"}},
		{"lng=-179.9&lat=-85.05112878&radius_km=5", []string{"south"}},
	} {
		got := f.nearby(t, tc.query)
		if !slices.Equal(ids(got), tc.want) {
			t.Errorf("%s: %v, want %v", tc.query, ids(got), tc.want)
		}
	}
	// The index keeps the meridian's single spelling, also when rebuilt
	// from PostgreSQL; the store keeps its own.
	for _, when := range []string{"written", "rebuilt"} {
		if when == "rebuilt" {
			f.r.Client.Del(context.Background(), f.s.indexKeys()...)
		}
		if got := f.nearby(t, "lng=179.99&lat=10&radius_km=5"); len(got) != 1 || got[0].Store.Lng != 180 || math.Abs(got[0].DistanceKm-1.096) > 0.01 {
			t.Errorf("%s: store at 180 from 179.99: %+v, want lng 180 at 1.096 km", when, got)
		}
	}
}

func TestFarSide(t *testing.T) {
	for _, tc := range []struct {
		q   Query
		ok  bool
		lng float64
	}{
		{Query{Lng: 180, Lat: 0, RadiusKm: 1}, true, -180},
		{Query{Lng: -180, Lat: 0, RadiusKm: 1}, true, 180},
		{Query{Lng: 179, Lat: 0, RadiusKm: 100}, false, 0},   // 111 km to the line
		{Query{Lng: 179, Lat: 0, RadiusKm: 112}, true, -180}, // just across
		{Query{Lng: 0, Lat: 85, RadiusKm: 600}, true, 180},   // across the pole
		{Query{Lng: 0, Lat: 85, RadiusKm: 500}, false, 0},
	} {
		lng, _, r, ok := farSide(tc.q)
		if ok != tc.ok || ok && (lng != tc.lng || r < tc.q.RadiusKm) {
			t.Errorf("farSide(%+v) = %v %v %v, want %v %v", tc.q, lng, r, ok, tc.lng, tc.ok)
		}
	}
}
