package onetrip

import (
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/ratelimit"
)

// Trips runs the /api/v1 requests' checks: before the route (UpFront),
// or with the route's first Redis step (Ride, RidePublic).
type Trips struct {
	l    *ratelimit.Limiter
	auth *auth.Service
	run  redis.Scripter
	o    ratelimit.Options
	// single: one Redis server, where the session check may share a
	// script with the window (a cluster refuses keys of several slots).
	single         bool
	oneTrip, reads bool
}

// Config is what Trips runs on.
type Config struct {
	Limiter *ratelimit.Limiter
	Auth    *auth.Service
	// Redis is the limiter's client; Run is where the scripts run: Redis,
	// or an auto-pipeliner of it.
	Redis redis.UniversalClient
	Run   redis.Scripter
	// Options are the limiter's answers (429, 503), client key and
	// timeout.
	Options ratelimit.Options
	// OneTrip lets the checks of the routes that Ride run with their step
	// (SHOP_REDIS_ONE_TRIP), Reads those of the routes that RidePublic
	// (their reads come from the limiter's Redis in a script call, and the
	// limiter is on). Either needs one Redis server.
	OneTrip, Reads bool
}

// New returns the checks' runner.
func New(cfg Config) *Trips {
	_, single := cfg.Redis.(*redis.Client)
	run := cfg.Run
	if run == nil {
		run = cfg.Redis
	}
	if cfg.Options.Timeout == 0 {
		cfg.Options.Timeout = time.Second
	}
	return &Trips{l: cfg.Limiter, auth: cfg.Auth, run: run, o: cfg.Options, single: single,
		oneTrip: cfg.OneTrip && single, reads: cfg.Reads && single}
}

// UpFront runs a request's checks before its route: the window and, when
// the request bears a token, its session check in one script call, whose
// answer the guards then read (auth.SessionCheck) instead of calling
// Redis again. A request the window refuses never runs the check, so its
// session's idle expiry does not slide. With the limiter off requests pass
// as if it were not there, and the guards check sessions themselves.
func (t *Trips) UpFront(c *fiber.Ctx) error {
	if t.l.Off() {
		return c.Next()
	}
	ck := t.checksOf(c, false, false)
	if err := ck.Settle(); err != nil {
		return err
	}
	return c.Next()
}

// Ride is the route-level middleware of a signed-in route that rides the
// one trip: its checks wait for the route's first Redis step (Of,
// Checks.Run), whose script runs the step only when the window allows the
// request and the session admits it; RequireUser lets the request reach
// the route as the token's subject meanwhile. When the route answers
// without running them, the checks run alone after it, and their refusal
// (429, 503, then 401) replaces its answer. So a route that rides must
// change nothing before its step, and take RequireUser, not RequireAdmin
// (which checks the session itself). Where the checks cannot ride (a
// cluster, SHOP_REDIS_ONE_TRIP=false) they run up front.
func (t *Trips) Ride(c *fiber.Ctx) error {
	if !t.oneTrip {
		return t.UpFront(c)
	}
	return t.ride(c, t.checksOf(c, true, true))
}

// RidePublic is Ride for a public route (a product read): its step runs
// whatever the session check answers, and the request is the session's
// user once it answered for one, else anonymous (a revoked token reads as
// no token). Its checks ride only with Config.Reads; otherwise they run
// up front, and auth's OptionalUser reads the session's answer.
func (t *Trips) RidePublic(c *fiber.Ctx) error {
	if !t.reads {
		return t.UpFront(c)
	}
	ck := t.checksOf(c, false, true)
	err := t.ride(c, ck)
	if ck.session != nil && ck.session.Ran {
		if u, uerr := ck.session.User(); uerr == nil {
			c.SetUserContext(auth.NewContextWithUser(c.UserContext(), u))
		}
	}
	return err
}

// ride runs c's route with ck waiting for its step, then ck alone if the
// route did not run it, and answers its refusal, or the route's answer.
func (t *Trips) ride(c *fiber.Ctx, ck *Checks) error {
	c.Locals(checksKey{}, ck)
	err := c.Next()
	if refusal := ck.Settle(); refusal != nil {
		return refusal
	}
	return err
}

// checksOf builds c's checks, deferred when they wait for the route's
// step; verdict: a signed-in route's (see Checks). The session check
// rides only on a single Redis, where it is handed to the guards through
// the request's context.
func (t *Trips) checksOf(c *fiber.Ctx, verdict, deferred bool) *Checks {
	ck := &Checks{t: t, c: c, client: t.o.Key(c), verdict: verdict}
	if t.single {
		ck.session = t.auth.SessionCheckOf(c)
	}
	if ck.session != nil {
		ck.session.Deferred = deferred
		c.SetUserContext(auth.WithSessionCheck(c.UserContext(), ck.session))
	}
	return ck
}
