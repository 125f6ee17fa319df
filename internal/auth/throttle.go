package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/ratelimit"
)

// ErrLoginThrottled: the email has spent its failure budget; the copy
// returned carries RetryAfter.
var ErrLoginThrottled = apperr.NewError(apperr.CodeRateLimited, "too many failed logins for this email; retry later")

// loginThrottle limits failed logins per account, whatever the client IP:
// a guesser spreading attempts over many addresses (or forged
// X-Forwarded-For) still spends one account's budget. It keys on the
// normalised email, so unknown emails are throttled alike and the answer
// does not tell which exist. The budget is the rate limiter's sliding
// window: each login takes an attempt before its password is checked, and
// gives it back unless the password was wrong, so only failures count and
// a burst of guesses released at once cannot overshoot the budget. The
// owner is slowed, never locked out for good: failures leave the window as
// it slides.
type loginThrottle struct {
	l   *ratelimit.Limiter // nil: off
	log *slog.Logger
	// failure classifies Redis errors as the session store does.
	failure func(op string, err error) error
}

func newLoginThrottle(rdb redis.UniversalClient, cfg Config, st *sessionStore, log *slog.Logger) loginThrottle {
	t := loginThrottle{log: log, failure: st.failure}
	if cfg.LoginFailures > 0 && cfg.LoginWindow > 0 {
		t.l = ratelimit.New(rdb, cfg.KeyPrefix+"login:", cfg.LoginFailures, cfg.LoginWindow)
	}
	return t
}

// take counts a login for email against its budget. It returns
// ErrLoginThrottled (with RetryAfter) when the budget is spent, and an
// apperr.Unavailable error when Redis does not answer.
func (t loginThrottle) take(ctx context.Context, email string) (ratelimit.Attempt, error) {
	if t.l == nil {
		return ratelimit.Attempt{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	res, a, err := t.l.Take(ctx, accountKey(email))
	if err != nil {
		return a, t.failure("login throttle", err)
	}
	if !res.Allowed {
		e := *ErrLoginThrottled
		e.RetryAfter = res.RetryAfterSeconds()
		return a, &e
	}
	return a, nil
}

// settle gives the attempt back unless err says the password was wrong:
// successes and outages do not spend the budget.
func (t loginThrottle) settle(ctx context.Context, a ratelimit.Attempt, err error) {
	if t.l == nil || errors.Is(err, ErrInvalidCredentials) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisTimeout)
	defer cancel()
	if rerr := t.l.Refund(ctx, a); rerr != nil {
		t.log.Warn("login throttle: attempt not given back", "err", rerr)
	}
}

// accountKey names an email's budget: a hash of its case-folded NFC form,
// so no address appears in Redis keys and every key is the same length.
func accountKey(email string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(normalizeEmail(email))))
	return hex.EncodeToString(sum[:])
}
