package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	_ "embed"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/outage"
)

// redisTimeout bounds every session call: the token check sits on every
// authenticated request, so a stalled Redis must become a quick 503.
const redisTimeout = 2 * time.Second

// maxRefreshToken caps what is parsed as a refresh token; ours are ~124 bytes.
const maxRefreshToken = 256

var (
	//go:embed check.lua
	checkLua string
	//go:embed rotate.lua
	rotateLua string
)

// errSessionGone: the session does not exist or the token is not its
// current one (logged out, revoked, expired, or refreshed since).
var errSessionGone = errors.New("session gone or token superseded")

// Session hash fields.
const (
	fieldUser    = "uid"
	fieldEmail   = "email"
	fieldName    = "name"
	fieldRole    = "role"
	fieldDevice  = "device"
	fieldRefresh = "rt"
	fieldJTI     = "jti"
	fieldCreated = "created"
)

// sessionStore keeps sessions in Redis, one hash per login.
type sessionStore struct {
	rdb    redis.UniversalClient
	prefix string
	ttl    time.Duration
	macKey []byte
	log    *slog.Logger
	check  *redis.Script
	rotate *redis.Script
}

func newSessionStore(rdb redis.UniversalClient, prefix string, ttl time.Duration, macKey []byte, log *slog.Logger) *sessionStore {
	return &sessionStore{
		rdb: rdb, prefix: prefix, ttl: ttl, macKey: macKey, log: log,
		check:  redis.NewScript(checkLua),
		rotate: redis.NewScript(rotateLua),
	}
}

// key is the session hash: <prefix>session:<sid>.
func (st *sessionStore) key(sid string) string { return st.prefix + "session:" + sid }

// grant is a new session's (or a rotation's) fresh credentials.
type grant struct {
	sid, jti, refresh string
}

// create stores a new session for u and returns its credentials. HSET and
// PEXPIRE go in one MULTI, so no session ever lives without an expiry.
func (st *sessionStore) create(ctx context.Context, u User, device string, now time.Time) (grant, error) {
	sid := uuid.NewString()
	g := grant{sid: sid, jti: uuid.NewString(), refresh: st.newRefresh(sid)}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	key := st.key(sid)
	cmds, err := st.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key,
			fieldUser, u.ID, fieldEmail, u.Email, fieldName, u.Name, fieldRole, u.Role,
			fieldDevice, device, fieldRefresh, digest(g.refresh), fieldJTI, g.jti,
			fieldCreated, now.Unix())
		p.PExpire(ctx, key, st.ttl)
		return nil
	})
	if err != nil {
		// An EXECABORT says why only in the queued commands: an OOM Redis
		// is an outage, not a bug.
		return grant{}, st.failure("create session", outage.TxError(cmds, err))
	}
	return g, nil
}

// lookup returns the session's user when sid exists and jti is its current
// access token, sliding the idle expiry. errSessionGone otherwise.
func (st *sessionStore) lookup(ctx context.Context, sid, jti string) (User, error) {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	keys, args := st.checkArgs(sid, jti)
	reply, err := st.check.Run(ctx, st.rdb, keys, args...).Result()
	if errors.Is(err, redis.Nil) {
		return User{}, errSessionGone
	}
	if err != nil {
		return User{}, st.failure("check session", err)
	}
	return sessionUser(reply)
}

// checkArgs are check.lua's keys and arguments for a token.
func (st *sessionStore) checkArgs(sid, jti string) ([]string, []any) {
	return []string{st.key(sid)}, []any{jti, st.ttl.Milliseconds()}
}

// sessionUser reads check.lua's answer: nil when the session is gone or
// the token superseded, else {uid, role, email, name}.
func sessionUser(reply any) (User, error) {
	if reply == nil {
		return User{}, errSessionGone
	}
	v, ok := reply.([]any)
	if !ok || len(v) != 4 {
		return User{}, fmt.Errorf("check session: unexpected script answer %v", reply)
	}
	var s [4]string
	for i := range s {
		if s[i], ok = v[i].(string); !ok {
			return User{}, fmt.Errorf("check session: unexpected script answer %v", reply)
		}
	}
	return User{ID: s[0], Role: s[1], Email: s[2], Name: s[3]}, nil
}

// refresh swaps the session's refresh token and access jti. It returns
// ErrInvalidToken for a malformed or forged token or a gone session, and
// ErrRefreshReused (after deleting the session) for an already used token.
func (st *sessionStore) refresh(ctx context.Context, presented string) (User, grant, error) {
	sid, err := st.verifyRefresh(presented)
	if err != nil {
		return User{}, grant{}, fmt.Errorf("refresh: %w: %w", ErrInvalidToken, err)
	}
	g := grant{sid: sid, jti: uuid.NewString(), refresh: st.newRefresh(sid)}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	v, err := st.rotate.Run(ctx, st.rdb, []string{st.key(sid)},
		digest(presented), digest(g.refresh), g.jti, st.ttl.Milliseconds()).Slice()
	if err != nil {
		return User{}, grant{}, st.failure("rotate session", err)
	}
	u, g, err := rotated(v, g)
	if errors.Is(err, ErrRefreshReused) {
		st.log.Warn("refresh token reused: session revoked", "sid", sid)
	}
	return u, g, err
}

// rotated reads rotate.lua's answer.
func rotated(v []any, g grant) (User, grant, error) {
	var code int64 = 2 // not an answer the script gives
	if len(v) > 0 {
		code, _ = v[0].(int64)
	}
	switch {
	case code == 0:
		return User{}, grant{}, fmt.Errorf("refresh: %w: %w", ErrInvalidToken, errSessionGone)
	case code == -1:
		return User{}, grant{}, fmt.Errorf("refresh: %w", ErrRefreshReused)
	case code != 1 || len(v) != 5:
		return User{}, grant{}, fmt.Errorf("rotate session: unexpected script answer %v", v)
	}
	s := make([]string, 4)
	for i := range s {
		s[i], _ = v[i+1].(string)
	}
	return User{ID: s[0], Role: s[1], Email: s[2], Name: s[3]}, g, nil
}

// revoke deletes the session: its access and refresh tokens stop working.
// Revoking a gone session is not an error.
func (st *sessionStore) revoke(ctx context.Context, sid string) error {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	if err := st.rdb.Del(ctx, st.key(sid)).Err(); err != nil {
		return st.failure("revoke session", err)
	}
	return nil
}

// newRefresh makes "<sid>.<nonce>.<mac>" with 32 random bytes of nonce.
func (st *sessionStore) newRefresh(sid string) string {
	nonce := make([]byte, 32)
	_, _ = rand.Read(nonce) // crypto/rand.Read never fails (Go 1.24+)
	body := sid + "." + base64.RawURLEncoding.EncodeToString(nonce)
	return body + "." + base64.RawURLEncoding.EncodeToString(st.mac(body))
}

// verifyRefresh checks a refresh token's form and MAC and returns its
// session id. A valid MAC proves we issued the token.
func (st *sessionStore) verifyRefresh(token string) (string, error) {
	if len(token) > maxRefreshToken || len(st.macKey) == 0 {
		return "", errors.New("refresh token too long, or no key")
	}
	i := strings.LastIndexByte(token, '.')
	if i < 0 {
		return "", errors.New("refresh token malformed")
	}
	body, sig := token[:i], token[i+1:]
	sid, _, ok := strings.Cut(body, ".")
	mac, err := base64.RawURLEncoding.DecodeString(sig)
	if !ok || !isUUID(sid) || err != nil || !hmac.Equal(mac, st.mac(body)) {
		return "", errors.New("refresh token malformed or forged")
	}
	return sid, nil
}

func (st *sessionStore) mac(body string) []byte {
	m := hmac.New(sha256.New, st.macKey)
	m.Write([]byte(body))
	return m.Sum(nil)
}

// digest is what the session stores of a refresh token: never the token.
func digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// failure classifies a Redis error (outage.Is): a server that
// is unreachable, too slow, loading, failing over, out of memory or busy
// with a script is an outage, 503 and never 401; any other reply is a bug.
func (st *sessionStore) failure(op string, err error) error {
	if !outage.Is(err) {
		return fmt.Errorf("%s: %w", op, err)
	}
	st.log.Warn("redis unavailable", "op", op, "err", err)
	return fmt.Errorf("%s: %w: %w", op, apperr.Unavailable("the session store is unreachable; retry shortly"), err)
}
