// Package loadtest is `shop loadtest`: a flash-sale load generator that
// drives a running shop over its public HTTP API and then checks that the
// sale added up.
//
// The reasoning behind it is in docs/design/loadtest.md.
package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Bounds on a run, so that a typo cannot start an endless or huge one.
const (
	MaxDuration = 10 * time.Minute
	MaxUsers    = 10_000
	// MaxUnits is what the server accepts for one seeding.
	MaxUnits       = 10_000_000
	MaxConnections = 10_000
	MaxRate        = 1_000_000
)

// Config is one load test.
type Config struct {
	// Target is the shop's base URL, like http://127.0.0.1:8080.
	Target string
	// AllowRemote permits a target that does not resolve to loopback.
	AllowRemote bool
	// AdminEmail and AdminPassword log in the admin who creates the product.
	AdminEmail, AdminPassword string
	// Users is the number of shoppers to register and log in.
	Users int
	// Units is the stock seeded; PerUserLimit is the most units one shopper
	// may buy (0: unlimited).
	Units, PerUserLimit int
	// Rate is purchase attempts per second (an open model); 0 means as fast
	// as Connections workers go (a closed model).
	Rate int
	// Connections is the number of workers and TCP connections: exactly
	// that many with Rate 0, at most that many otherwise.
	Connections int
	// Duration caps the attack; it ends earlier once nothing can be sold.
	Duration time.Duration
	// Timeout bounds each request.
	Timeout time.Duration
	// DrainTimeout bounds the wait for the order writer after the attack.
	DrainTimeout time.Duration
	// PayRatio is the share of the winners (0 to 1) that pay for their
	// orders after the sale; the rest let them expire, and the run waits
	// for the server to give their units back. 0: nobody pays and nothing
	// is waited for (the orders stay confirmed until their window closes).
	PayRatio float64
	// ExpiryTimeout bounds the wait, after the latest expires_at of the
	// unpaid orders, for the expiry sweep to give their units back.
	ExpiryTimeout time.Duration
	// Sample is how many accepted orders are read back to check that they
	// are confirmed.
	Sample int
	// SetupWorkers is how many shoppers are registered at once (each costs
	// the server two argon2 hashes).
	SetupWorkers int
	// ForwardedFor sends a distinct X-Forwarded-For address per shopper, so
	// a server that trusts this host as a proxy limits each on its own.
	ForwardedFor bool
	// RedisURL and DatabaseURL name the server's own stores, KeyPrefix its
	// Redis key prefix. When given, the invariants I1–I7 are judged on
	// them directly (the live stock sampled during the attack, the rows,
	// the stream), not only on what the API reports; without them those
	// parts are reported skipped.
	RedisURL, DatabaseURL, KeyPrefix string
	// RedisCluster: RedisURL names a Redis Cluster, as SHOP_REDIS_URL does
	// with SHOP_REDIS_CLUSTER=true (a seed node, more as ?addr=); the keys
	// are then read where a server on a cluster puts them (LayoutOf).
	RedisCluster bool
	// AcceptedOut, when set, is a file the id of every order answered 202
	// is written to, one a line (for `shop recover --accepted`).
	AcceptedOut string
	// Progress, when set, shows progress bars (a terminal).
	Progress io.Writer
	// Warn receives warnings, such as rate-limited answers.
	Warn io.Writer
	// Room, when set, puts the round behind a waiting room: the shoppers
	// join, wait and buy with their passes (room.go).
	Room *RoomConfig
}

// Validate checks every bound and reports the first one broken, by flag name.
func (c *Config) Validate() error {
	checks := []struct {
		bad bool
		msg string
	}{
		{c.Target == "", "--target is required"},
		{c.AdminEmail == "" || c.AdminPassword == "", "--admin-email and --admin-password (or SHOP_LOADTEST_ADMIN_EMAIL/_PASSWORD) are required"},
		{c.Users < 1 || c.Users > MaxUsers, fmt.Sprintf("--users must be 1 to %d", MaxUsers)},
		{c.Units < 1 || c.Units > MaxUnits, fmt.Sprintf("--units must be 1 to %d", MaxUnits)},
		{c.PerUserLimit < 0 || c.PerUserLimit > 1_000_000, "--per-user-limit must be 0 (unlimited) to 1000000"},
		{c.Rate < 0 || c.Rate > MaxRate, fmt.Sprintf("--rate must be 0 (as fast as possible) to %d", MaxRate)},
		{c.Connections < 1 || c.Connections > MaxConnections, fmt.Sprintf("--connections must be 1 to %d", MaxConnections)},
		{c.Duration < time.Second || c.Duration > MaxDuration, fmt.Sprintf("--duration must be 1s to %s", MaxDuration)},
		{c.Timeout <= 0 || c.Timeout > time.Minute, "--timeout must be more than 0 and at most 1m"},
		{c.DrainTimeout <= 0 || c.DrainTimeout > MaxDuration, fmt.Sprintf("--drain-timeout must be more than 0 and at most %s", MaxDuration)},
		{c.Sample < 0 || c.Sample > 10_000, "--sample must be 0 to 10000"},
		{!(c.PayRatio >= 0 && c.PayRatio <= 1), "--pay-ratio must be 0 to 1"},
		{c.PayRatio > 0 && (c.ExpiryTimeout <= 0 || c.ExpiryTimeout > MaxDuration),
			fmt.Sprintf("--expiry-timeout must be more than 0 and at most %s", MaxDuration)},
		{c.SetupWorkers < 1 || c.SetupWorkers > 64, "--setup-workers must be 1 to 64"},
		{(c.RedisURL == "") != (c.DatabaseURL == ""), "--redis-url and --database-url go together"},
		{c.RedisCluster && c.RedisURL == "", "--redis-cluster needs --redis-url"},
		{c.Room != nil && (c.Room.AdmitPerSecond < 1 || c.Room.AdmitPerSecond > 100_000), "--waiting-room must be 1 to 100000 admissions a second"},
		{c.Room != nil && (c.Room.ChallengeBits < 0 || c.Room.ChallengeBits > 24), "--challenge-bits must be 0 to 24"},
		{c.Room != nil && (c.Room.JoinWindow < 0 || c.Room.JoinWindow > time.Minute), "--join-window must be 0 to 1m"},
		{c.Room != nil && (c.Room.MaxPoll < 0 || c.Room.MaxPoll > time.Minute), "--ticket-poll-max must be 0 to 1m"},
		{c.Room != nil && c.Room.Wait != "" && c.Room.Wait != WaitEvents && c.Room.Wait != WaitPoll, "--room-wait must be events or poll"},
		{c.Room != nil && (c.Room.PassTTL < 10*time.Second || c.Room.PassTTL > time.Hour), "--pass-ttl must be 10s to 1h"},
		{c.Room != nil && c.PayRatio > 0, "--pay-ratio does not go with --waiting-room"},
	}
	for _, ch := range checks {
		if ch.bad {
			return errors.New(ch.msg)
		}
	}
	return nil
}

// Run performs the load test. It returns an error when the test could not
// be carried out (bad config, unreachable or refusing server, interrupted);
// a completed test returns its report, whose OK says whether every
// invariant held.
func Run(ctx context.Context, cfg Config) (_ *Report, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Warn == nil {
		cfg.Warn = io.Discard
	}
	tgt, err := resolveTarget(ctx, cfg.Target, cfg.AllowRemote)
	if err != nil {
		return nil, err
	}
	st, err := openStores(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer st.close()
	// The admin's requests come from adminAddr with ForwardedFor; each
	// shopper's from its own (c.as).
	c := newClient(tgt, cfg.Timeout, cfg.ForwardedFor).as(adminAddr)
	setupStart := time.Now()
	fx, err := setup(ctx, c, cfg) // deletes its product when it fails
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			discard(c, fx, cfg.Warn)
		}
	}()
	setupTime := time.Since(setupStart)
	sampler := st.sample(cfg, fx.sku)
	var res *attackResult
	var rr *roomRun
	if cfg.Room != nil {
		res, rr, err = roomAttack(ctx, tgt, cfg, fx, fx.startsAt)
	} else {
		res, err = attack(ctx, tgt, cfg, fx)
	}
	samples := sampler.stopped()
	if err != nil {
		return nil, err
	}
	if cfg.AcceptedOut != "" {
		if err := writeAccepted(cfg.AcceptedOut, res.tally); err != nil {
			return nil, err
		}
	}
	v, err := verify(ctx, c, cfg, fx, res.tally, st, samples)
	if err != nil {
		return nil, err
	}
	var room *RoomStats
	if rr != nil {
		var inv []Invariant
		if room, inv, err = checkRoom(ctx, c, cfg, fx, rr); err != nil {
			return nil, err
		}
		v.invariants = append(v.invariants, inv...)
	}
	rep := newReport(cfg, tgt, fx, setupTime, res, v)
	rep.Room = room
	return rep, nil
}
