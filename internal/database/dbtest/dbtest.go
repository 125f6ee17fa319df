// Package dbtest opens the shop's own clients on the servers testenv
// starts, for tests of the packages above internal/database (testenv
// itself cannot: internal/database's tests use it).
package dbtest

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/database"
	"github.com/shop-oss/shop/internal/testenv"
)

// OpenCluster opens a cluster client on c as `shop serve` opens one
// (database.OpenCluster, default options), closed when t ends.
func OpenCluster(t testing.TB, c *testenv.RedisCluster) *redis.ClusterClient {
	t.Helper()
	rdb, err := database.OpenCluster(context.Background(), c.URL, database.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}
