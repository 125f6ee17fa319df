package server

import (
	"context"
	"fmt"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/openapi"
)

// readyTimeout bounds each store's ping, so /readyz answers within a second
// or two even when a store hangs.
const readyTimeout = time.Second

func healthz(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"status": "ok"})
}

// readyz answers 200 when Redis and PostgreSQL both answer a ping, else a
// 503 problem whose "failed" member names the stores that did not.
func readyz(rdb redis.UniversalClient, db *pgxpool.Pool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		checks := map[string]string{"redis": "ok", "postgres": "ok"}
		var failed []string
		ping := func(name string, f func(context.Context) error) {
			ctx, cancel := context.WithTimeout(c.UserContext(), readyTimeout)
			defer cancel()
			if err := f(ctx); err != nil {
				checks[name] = err.Error()
				failed = append(failed, name)
			}
		}
		ping("redis", func(ctx context.Context) error { return pingRedis(ctx, rdb) })
		ping("postgres", db.Ping)
		if len(failed) > 0 {
			e := apperr.Unavailable("not ready: " + failed[0] + " is unreachable")
			e.Extra = map[string]any{"failed": failed, "checks": checks}
			return e
		}
		return c.JSON(fiber.Map{"status": "ok", "checks": checks})
	}
}

// pingRedis pings the one server, or every master of a cluster: a master
// that does not answer holds slots (SKUs, users) this instance cannot
// serve, and the cluster refuses every slot while one is uncovered
// (cluster-require-full-coverage, the default).
func pingRedis(ctx context.Context, rdb redis.UniversalClient) error {
	if c, ok := rdb.(*redis.ClusterClient); ok {
		return c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			if err := node.Ping(ctx).Err(); err != nil {
				return fmt.Errorf("%s: %w", node.Options().Addr, err)
			}
			return nil
		})
	}
	return rdb.Ping(ctx).Err()
}

func openapiHandler(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, "application/yaml")
	return c.Send(openapi.Spec)
}
