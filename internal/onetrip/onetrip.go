// Package onetrip owns a request's checks, the per-IP rate limiter's
// window and, when the request bears a token, its session check, and the
// one script that runs them: alone before the route (UpFront), or on a
// single Redis in the same call as the route's first Redis step, for the
// routes whose registration says they ride (Ride, RidePublic). Such a
// route's handler takes the request's Checks (Of) and passes them down as
// a parameter to its step, which runs them with its own script (a Step,
// declared beside that script in its domain).
//
// trip.lua is that script, read top to bottom; this package fills its
// slots, and no other assembles one.
//
// The reasoning is in docs/design/onetrip.md.
package onetrip

import (
	_ "embed"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/ratelimit"
)

//go:embed trip.lua
var tripLua string

// Step is a route's first Redis step with the checks before it: trip.lua
// with the step's own script in its last slot.
type Step struct {
	lua    string
	script *redis.Script
}

// NewStep assembles the one trip of a step's script (its domain's own
// Lua, unchanged). The step sees the KEYS and ARGV it passes to
// Checks.Run, as if it ran alone.
func NewStep(lua string) *Step {
	s := assemble(lua)
	return &Step{lua: s, script: redis.NewScript(s)}
}

// checksAlone is the trip without a step: the checks before the route.
var checksAlone = NewStep("return false")

// assemble fills trip.lua's slots with each part's own script; a part's
// shebang line is dropped, since only the first line of the whole may be
// one.
func assemble(step string) string {
	return strings.NewReplacer(
		"{{window}}", dropShebang(ratelimit.WindowLua()),
		"{{session}}", dropShebang(auth.SessionCheckLua()),
		"{{admits}}", auth.AdmitLua(),
		"{{step}}", dropShebang(step),
	).Replace(tripLua)
}

func dropShebang(lua string) string {
	if !strings.HasPrefix(lua, "#!") {
		return lua
	}
	_, rest, _ := strings.Cut(lua, "\n")
	return rest
}
