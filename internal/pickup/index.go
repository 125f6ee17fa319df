package pickup

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/outage"
)

var (
	//go:embed whole.lua
	wholeLua string
	//go:embed write.lua
	writeLua string
	//go:embed nearby.lua
	nearbyLua string
	//go:embed swap.lua
	swapLua string

	writeScript  = redis.NewScript(wholeLua + writeLua)
	nearbyScript = redis.NewScript(wholeLua + nearbyLua)
	swapScript   = redis.NewScript(swapLua)
	wholeScript  = redis.NewScript(wholeLua + "return index_whole() and 1 or 0")
)

// errNotBuilt: the index is missing (a search must rebuild it first).
var errNotBuilt = errors.New("pickup: index not built")

func (s *Service) tag() string { return s.prefix + "{stores}:" }
func (s *Service) indexKeys() []string {
	return []string{s.tag() + "geo", s.tag() + "info", s.tag() + "state"}
}

// indexPut and indexDelete are an admin write's step on the index.
func (s *Service) indexPut(ctx context.Context, st Store) error {
	doc, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return s.indexWrite(ctx, "put", st.ID, geoLng(st.Lng), st.Lat, string(doc))
}

func (s *Service) indexDelete(ctx context.Context, id string) error {
	return s.indexWrite(ctx, "del", id)
}

func (s *Service) indexWrite(ctx context.Context, args ...any) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisTimeout)
	defer cancel()
	if err := writeScript.Run(ctx, s.rdb, s.indexKeys(), args...).Err(); err != nil {
		return fmt.Errorf("index %v: %w: %w", args[:2], errIndexLag, err)
	}
	return nil
}

// search runs a nearby search on the index; errNotBuilt when missing.
func (s *Service) search(ctx context.Context, q Query) ([]Nearby, error) {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	args := []any{geoLng(q.Lng), q.Lat, q.RadiusKm, q.Limit, "", "", ""}
	if lng, lat, r, ok := farSide(q); ok {
		args[4], args[5], args[6] = lng, lat, r
	}
	v, err := nearbyScript.Run(ctx, s.rdb, s.indexKeys(), args...).Slice()
	if errors.Is(err, redis.Nil) {
		return nil, errNotBuilt
	}
	if err != nil {
		return nil, outage.Wrap("nearby stores", errIndexDown, err)
	}
	out := make([]Nearby, 0, len(v))
	for _, hit := range v {
		n, err := parseHit(hit)
		if err != nil {
			return nil, fmt.Errorf("nearby stores: %w", err)
		}
		out = append(out, n)
	}
	return out, nil
}

// earthKm is the radius Redis's geo commands use (geohash_helper.c).
const earthKm = 6372.797560856

// farSide returns, when q's circle crosses the antimeridian, a centre on
// its far side (±180 at q's latitude) and a radius from there that holds
// the whole circle: GEOSEARCH does not look across ±180 by itself.
func farSide(q Query) (lng, lat, radiusKm float64, ok bool) {
	toMeridian := 180 - math.Abs(q.Lng) // degrees of longitude to ±180
	var apart float64                   // radians from q to the ±180 half-meridian
	if toMeridian <= 90 {
		apart = math.Asin(math.Cos(rad(q.Lat)) * math.Sin(rad(toMeridian)))
	} else {
		apart = rad(90 - math.Abs(q.Lat)) // nearest across a pole
	}
	if apart*earthKm > q.RadiusKm {
		return 0, 0, 0, false
	}
	lng = 180.0
	if q.Lng > 0 {
		lng = -180
	}
	// The triangle inequality: a store within q.RadiusKm of q is within
	// that plus q's distance to the far centre of it; nearby.lua measures
	// each hit from q again. The extra metre absorbs rounding.
	return lng, q.Lat, q.RadiusKm + haversineKm(q.Lng, q.Lat, lng, q.Lat) + 0.001, true
}

// geoLng spells the antimeridian -180 in the geo set and in searches:
// Redis files exactly 180 past the end of its geohash range, where only a
// search from exactly 180 finds it (a store there was missed 1.1 km away).
func geoLng(lng float64) float64 {
	if lng == 180 {
		return -180
	}
	return lng
}

// haversineKm is Redis's geohashGetDistance, in km.
func haversineKm(lng1, lat1, lng2, lat2 float64) float64 {
	u := math.Sin(rad(lat2-lat1) / 2)
	v := math.Sin(rad(lng2-lng1) / 2)
	return 2 * earthKm * math.Asin(math.Sqrt(u*u+math.Cos(rad(lat1))*math.Cos(rad(lat2))*v*v))
}

func rad(deg float64) float64 { return deg * math.Pi / 180 }

// indexWhole reports whether the index is built whole (whole.lua).
func (s *Service) indexWhole(ctx context.Context) (bool, error) {
	n, err := wholeScript.Run(ctx, s.rdb, s.indexKeys()).Int()
	return n == 1, err
}

func parseHit(hit any) (Nearby, error) {
	h, _ := hit.([]any)
	if len(h) != 3 {
		return Nearby{}, fmt.Errorf("bad hit %v", hit)
	}
	dist, _ := h[1].(string)
	doc, _ := h[2].(string)
	var n Nearby
	if err := json.Unmarshal([]byte(doc), &n.Store); err != nil {
		return Nearby{}, fmt.Errorf("store %v: %w", h[0], err)
	}
	d, err := strconv.ParseFloat(dist, 64)
	n.DistanceKm = d
	return n, err
}

// rebuild rebuilds the index from PostgreSQL; exact when several run at
// once or race admin writes (see the package doc).
func (s *Service) rebuild(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		swapped, err := s.rebuildOnce(ctx)
		if err != nil || swapped {
			return err
		}
		if attempt == rebuildAttempts {
			return errRebuildRaced
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(rebuildPause * time.Duration(attempt)):
		}
	}
}

func (s *Service) rebuildOnce(ctx context.Context) (bool, error) {
	keys := s.indexKeys()
	gen, err := s.rdb.HGet(ctx, keys[2], "gen").Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, outage.Wrap("rebuild store index", errIndexDown, err)
	}
	all, err := s.selectAll(ctx)
	if err != nil {
		return false, err
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	copies := []string{s.tag() + "rebuild:" + hex.EncodeToString(b) + ":geo", s.tag() + "rebuild:" + hex.EncodeToString(b) + ":info"}
	if err := s.fill(ctx, copies, all); err != nil {
		return false, outage.Wrap("rebuild store index", errIndexDown, err)
	}
	if s.beforeSwap != nil {
		s.beforeSwap()
	}
	n, err := swapScript.Run(ctx, s.rdb, append(keys, copies...), gen).Int()
	if err != nil {
		return false, outage.Wrap("rebuild store index", errIndexDown, err)
	}
	return n == 1, nil
}

// fill writes the stores into the copies (which expire if the rebuild
// dies before its swap).
func (s *Service) fill(ctx context.Context, copies []string, all []Store) error {
	pipe := s.rdb.Pipeline()
	for start := 0; start < len(all); start += rebuildChunk {
		chunk := all[start:min(start+rebuildChunk, len(all))]
		locs := make([]*redis.GeoLocation, len(chunk))
		docs := make([]any, 0, 2*len(chunk))
		for i, st := range chunk {
			locs[i] = &redis.GeoLocation{Name: st.ID, Longitude: geoLng(st.Lng), Latitude: st.Lat}
			doc, err := json.Marshal(st)
			if err != nil {
				return err
			}
			docs = append(docs, st.ID, string(doc))
		}
		pipe.GeoAdd(ctx, copies[0], locs...)
		pipe.HSet(ctx, copies[1], docs...)
	}
	for _, k := range copies {
		pipe.Expire(ctx, k, copyTTL)
	}
	_, err := pipe.Exec(ctx)
	return err
}
