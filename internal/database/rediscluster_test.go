package database_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/database"
	"github.com/shop-oss/shop/internal/outage"
	"github.com/shop-oss/shop/internal/testenv"
)

func openCluster(t *testing.T, c *testenv.RedisCluster) redis.UniversalClient {
	t.Helper()
	rdb, err := database.OpenUniversal(context.Background(), c.URL, true, database.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		t.Fatalf("OpenUniversal(cluster) gave a %T", rdb)
	}
	return rdb
}

// masterOf is the master that serves key.
func masterOf(t *testing.T, c *testenv.RedisCluster, key string) *redis.Client {
	t.Helper()
	ctx := context.Background()
	var found *redis.Client
	err := c.Client.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		slots, err := testenv.ClusterSlots(ctx, node)
		if err != nil {
			return err
		}
		slot := int(c.Slot(t, key))
		for _, s := range slots {
			if slot >= s.Start && slot <= s.End && s.Nodes[0].Addr == node.Options().Addr {
				found = node
			}
		}
		return nil
	})
	if err != nil || found == nil {
		t.Fatalf("no master for %s: %v", key, err)
	}
	return redis.NewClient(&redis.Options{Addr: found.Options().Addr})
}

// On a cluster the start-up checks run on every master: one evicting
// master is refused by its address, one without AOF gets its warning.
func TestClusterStartChecksEveryMaster(t *testing.T) {
	t.Parallel()
	c := testenv.StartCluster(t, 3)
	rdb := openCluster(t, c)
	ctx := context.Background()
	var w warnings
	if err := database.CheckNoEviction(ctx, rdb, w.logger()); err != nil || w.count() != 0 {
		t.Fatalf("noeviction everywhere: %v, %q", err, w.buf.String())
	}
	database.WarnWithoutAOF(ctx, rdb, w.logger())
	if w.count() != 0 {
		t.Fatalf("AOF on everywhere, but: %q", w.buf.String())
	}

	third := redis.NewClient(&redis.Options{Addr: strings.TrimPrefix(strings.TrimSuffix(c.Masters[2].URL, "/0"), "redis://")})
	defer third.Close()
	if err := third.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	err := database.CheckNoEviction(ctx, rdb, w.logger())
	if err == nil || !strings.Contains(err.Error(), third.Options().Addr) {
		t.Fatalf("CheckNoEviction with one evicting master: %v, want a refusal naming %s", err, third.Options().Addr)
	}
	if err := third.ConfigSet(ctx, "appendonly", "no").Err(); err != nil {
		t.Fatal(err)
	}
	database.WarnWithoutAOF(ctx, rdb, w.logger())
	if w.count() != 1 || !strings.Contains(w.buf.String(), third.Options().Addr) {
		t.Fatalf("one master without AOF: %q, want one warning naming %s", w.buf.String(), third.Options().Addr)
	}
}

// A script runs on whichever master owns its keys: go-redis sends EVALSHA
// there and falls back to EVAL on that node's NOSCRIPT, also after the
// node's script cache was flushed (a restart).
func TestClusterScriptsRunOnEveryMaster(t *testing.T) {
	t.Parallel()
	c := testenv.StartCluster(t, 3)
	rdb := openCluster(t, c)
	ctx := context.Background()
	script := redis.NewScript(`return redis.call('INCRBY', KEYS[1], ARGV[1])`)
	masters := map[string]bool{}
	for i := 0; len(masters) < 3 && i < 100; i++ {
		key := fmt.Sprintf("%s{k%d}", c.Prefix, i)
		node := masterOf(t, c, key)
		masters[node.Options().Addr] = true
		for round := range 2 {
			if n, err := script.Run(ctx, rdb, []string{key}, 2).Int(); err != nil || n != 2*(round+1) {
				t.Fatalf("%s on %s, run %d: %d %v", key, node.Options().Addr, round, n, err)
			}
			_ = node.ScriptFlush(ctx).Err() // the next run meets NOSCRIPT there
		}
		_ = node.Close()
	}
	if len(masters) != 3 {
		t.Fatalf("keys reached %d masters, want 3", len(masters))
	}
}

// A command whose reply is lost (it ran, then kept its master busy past
// the read timeout) comes back as an outage and is not sent again:
// go-redis's cluster client would resend it, and the INCR would run twice.
func TestClusterNeverResendsACommand(t *testing.T) {
	t.Parallel()
	c := testenv.StartCluster(t, 3)
	rdb := openCluster(t, c)
	ctx := context.Background()
	key := c.Prefix + "counter"
	err := rdb.Eval(ctx, slowIncr, []string{key}).Err()
	if err == nil || !outage.Is(err) {
		t.Fatalf("INCR with its reply lost: %v, want an outage", err)
	}
	time.Sleep(3 * time.Second) // a resend would have run by now
	if n, _ := c.Client.Get(ctx, key).Int(); n != 1 {
		t.Fatalf("the counter is %d: the INCR ran %d times", n, n)
	}
}

// slowIncr increments KEYS[1], then holds its master for 2.5 s, past the
// client's 2 s read timeout (below the 5 s busy-script limit).
const slowIncr = `redis.call('INCR', KEYS[1])
local s = redis.call('TIME')
repeat
  local n = redis.call('TIME')
until (n[1] - s[1]) * 1000000 + (n[2] - s[2]) > 2500000
return 1`

// masterIndex closes node, a master of c, and returns its index in
// c.Masters.
func masterIndex(t *testing.T, c *testenv.RedisCluster, node *redis.Client) int {
	t.Helper()
	addr := node.Options().Addr
	_ = node.Close()
	for i, m := range c.Masters {
		if strings.Contains(m.URL, addr) {
			return i
		}
	}
	t.Fatalf("%s is none of the cluster's masters", addr)
	return -1
}

// setKept sets the key "kept" to "v", acknowledged before a master goes,
// and returns it with a client on the master that holds it.
func setKept(ctx context.Context, t *testing.T, c *testenv.RedisCluster, rdb redis.UniversalClient) (string, *redis.Client) {
	t.Helper()
	key := c.Prefix + "kept"
	if err := rdb.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	return key, masterOf(t, c, key)
}

// killForOutage SIGKILLs master i, which holds key: a GET of key is an
// outage then, not some other error.
func killForOutage(ctx context.Context, t *testing.T, c *testenv.RedisCluster, rdb redis.UniversalClient, i int, key string) {
	t.Helper()
	c.Kill(i)
	if err := rdb.Get(ctx, key).Err(); err == nil || !outage.Is(err) {
		t.Fatalf("GET on a killed master: %v, want an outage", err)
	}
}

// A master killed with SIGKILL comes back on its AOF and nodes.conf: the
// cluster is ok again and keeps what it acknowledged.
func TestClusterMasterRestartsOnItsAOF(t *testing.T) {
	t.Parallel()
	c := testenv.StartCluster(t, 3)
	rdb := openCluster(t, c)
	ctx := context.Background()
	key, node := setKept(ctx, t, c, rdb)
	i := masterIndex(t, c, node)
	killForOutage(ctx, t, c, rdb, i, key)
	if err := c.Restart(i); err != nil {
		t.Fatal(err)
	}
	if v, err := rdb.Get(ctx, key).Result(); err != nil || v != "v" {
		t.Fatalf("after the restart: %q %v, want the acknowledged value", v, err)
	}
}

// A master killed with SIGKILL and replaced by its replica (CLUSTER
// FAILOVER TAKEOVER): the client finds the replica as soon as a command
// meets the dead master, not at go-redis's periodic reload of the slot
// map (a minute): the first commands are outages, then the key is served
// again within a generous bound well below that minute.
func TestClusterFollowsATakeover(t *testing.T) {
	t.Parallel()
	c := testenv.StartClusterWithReplicas(t, 3)
	rdb := openCluster(t, c)
	ctx := context.Background()
	key, node := setKept(ctx, t, c, rdb)
	// The replica has the key before its master goes.
	if n, err := node.Do(ctx, "WAIT", 1, 10000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT for the replica: %d %v", n, err)
	}
	i := masterIndex(t, c, node)
	slot := c.Slot(t, key)
	killForOutage(ctx, t, c, rdb, i, key)
	if err := c.TakeOver(slot); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		v, err := rdb.Get(ctx, key).Result()
		if err == nil && v == "v" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("20 s after the takeover GET still answers %q %v: the client did not find the new master", v, err)
		}
	}
	if err := rdb.Set(ctx, key, "w", 0).Err(); err != nil {
		t.Fatalf("SET on the new master: %v", err)
	}
}
