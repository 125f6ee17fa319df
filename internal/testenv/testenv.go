// Package testenv finds the Redis and PostgreSQL servers that integration
// tests run against, and gives each test its own database and key prefix so
// tests and packages run in parallel and leave nothing behind.
//
// Services are found, each on its own, in this order:
//
//  1. SHOP_TEST_REDIS_URL / SHOP_TEST_DATABASE_URL when set;
//  2. otherwise a testcontainers container, when a Docker engine answers
//     (probed with a short timeout, since testcontainers can hang or panic
//     without one), started once per test binary;
//  3. otherwise the test is skipped on a laptop, but fails when CI is set,
//     so CI can never go green having tested nothing.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
)

const (
	envRedis    = "SHOP_TEST_REDIS_URL"
	envDatabase = "SHOP_TEST_DATABASE_URL"
)

var (
	dockerOnce sync.Once
	dockerOK   bool

	redisOnce sync.Once
	redisURL  string
	redisErr  error

	pgOnce sync.Once
	pgURL  string
	pgErr  error
)

// RedisURL returns the URL of the Redis server for tests, or skips/fails t.
func RedisURL(t testing.TB) string {
	t.Helper()
	redisOnce.Do(func() { redisURL, redisErr = resolve(envRedis, startRedis) })
	return need(t, "Redis", envRedis, redisURL, redisErr)
}

// DatabaseURL returns the URL of a PostgreSQL server database that tests may
// create databases from (an admin connection), or skips/fails t.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	pgOnce.Do(func() { pgURL, pgErr = resolve(envDatabase, startPostgres) })
	return need(t, "PostgreSQL", envDatabase, pgURL, pgErr)
}

func resolve(env string, start func(context.Context) (string, error)) (string, error) {
	if u := os.Getenv(env); u != "" {
		return u, nil
	}
	if !dockerAvailable() {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return start(ctx)
}

func need(t testing.TB, what, env, url string, err error) string {
	t.Helper()
	switch {
	case err != nil:
		t.Fatalf("starting a %s container: %v", what, err)
	case url == "" && os.Getenv("CI") != "":
		t.Fatalf("no %s for tests: set %s (CI is set, so this fails instead of skipping)", what, env)
	case url == "":
		t.Skipf("no %s for tests: set %s or run a Docker engine", what, env)
	}
	return url
}

// dockerAvailable probes the Docker engine once, bounded in time and
// guarded against the panics testcontainers raises when there is none.
func dockerAvailable() bool {
	dockerOnce.Do(func() {
		done := make(chan bool, 1)
		go func() {
			defer func() {
				if recover() != nil {
					done <- false
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			p, err := testcontainers.ProviderDefault.GetProvider()
			if err != nil {
				done <- false
				return
			}
			done <- p.Health(ctx) == nil
		}()
		select {
		case dockerOK = <-done:
		case <-time.After(5 * time.Second):
		}
	})
	return dockerOK
}

func startRedis(ctx context.Context) (string, error) {
	c, err := tcredis.Run(ctx, "redis:7-alpine")
	if err != nil {
		return "", err
	}
	return c.ConnectionString(ctx)
}

func startPostgres(ctx context.Context) (string, error) {
	c, err := tcpostgres.Run(ctx, "postgres:15-alpine",
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"),
		tcpostgres.BasicWaitStrategies(),
	)
	if err != nil {
		return "", err
	}
	return c.ConnectionString(ctx, "sslmode=disable")
}

// uniqueName makes a short random name from the test's name, safe for key
// prefixes and logs.
func uniqueName(t testing.TB) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, t.Name())
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return fmt.Sprintf("%s_%s", name, hex.EncodeToString(b))
}
