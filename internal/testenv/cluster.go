package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisCluster is a Redis Cluster private to one test: masters only (no
// replicas), each a redis-server with cluster mode and AOF on
// (appendfsync always, as production), on free ports, each in its own
// directory with its nodes.conf. Kill and Restart crash and bring back one
// master on its AOF and nodes.conf. Everything is killed when t ends.
type RedisCluster struct {
	// URL is SHOP_REDIS_URL for SHOP_REDIS_CLUSTER=true: the first master,
	// the others as ?addr= seeds.
	URL     string
	Masters []*RedisProcess
	// Client is a plain cluster client for the test's own checks.
	Client *redis.ClusterClient
	// Prefix is a key prefix for the test, as testenv.Redis's.
	Prefix string
}

// StartCluster starts masters redis-servers and joins them with
// redis-cli --cluster create, the 16384 slots spread evenly, and waits
// until every node says cluster_state:ok. One master (a cluster of one
// node, for measuring what the cluster client and the slot layout cost
// against a plain Redis) is given every slot with CLUSTER ADDSLOTSRANGE,
// since redis-cli --cluster create wants at least 3. Without redis-server
// or redis-cli on PATH, t is skipped, or fails when CI is set.
func StartCluster(t testing.TB, masters int) *RedisCluster {
	t.Helper()
	if masters != 1 && masters < 3 {
		t.Fatalf("StartCluster: 1 master, or 3 and more (redis-cli --cluster create), not %d", masters)
	}
	cli, err := exec.LookPath("redis-cli")
	switch {
	case err != nil && os.Getenv("CI") != "":
		t.Fatalf("no redis-cli on PATH (CI is set, so this fails instead of skipping)")
	case err != nil:
		t.Skip("no redis-cli on PATH")
	}
	c := &RedisCluster{Prefix: "test:" + uniqueName(t) + ":"}
	addrs := make([]string, masters)
	for i := range masters {
		// The cluster bus port is given explicitly: the default, port +
		// 10000, may be taken or past 65535.
		// The address is announced: a node alone (one master) never
		// learns its own from a peer and would report "" in CLUSTER SLOTS.
		p := StartRedis(t, "--cluster-enabled", "yes", "--cluster-port", freePort(t), "--cluster-announce-ip", "127.0.0.1",
			"--cluster-node-timeout", "2000", "--appendonly", "yes", "--appendfsync", "always")
		c.Masters = append(c.Masters, p)
		addrs[i] = strings.TrimSuffix(strings.TrimPrefix(p.URL, "redis://"), "/0")
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if masters == 1 {
		host, port, _ := strings.Cut(addrs[0], ":")
		args = []string{"-h", host, "-p", port, "CLUSTER", "ADDSLOTSRANGE", "0", fmt.Sprint(16383)}
	}
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil || (masters == 1 && !strings.Contains(string(out), "OK")) {
		t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	c.URL = "redis://" + addrs[0]
	for i, a := range addrs[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		c.URL += sep + "addr=" + a
	}
	if err := c.WaitOK(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	c.Client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = c.Client.Close() })
	return c
}

// Kill SIGKILLs master i: no shutdown, no last fsync. With no replica to
// take over, its slots are down until Restart (and, with the default
// cluster-require-full-coverage, so is the whole cluster).
func (c *RedisCluster) Kill(i int) { c.Masters[i].Kill() }

// Restart starts master i again on its port, AOF and nodes.conf, and
// waits until the cluster is ok again. It may be called from any
// goroutine, so it returns an error rather than failing a test.
func (c *RedisCluster) Restart(i int) error {
	if err := c.Masters[i].Restart(); err != nil {
		return err
	}
	return c.WaitOK(30 * time.Second)
}

// WaitOK waits until every running master reports cluster_state:ok and
// sees every other as connected, or timeout passes.
func (c *RedisCluster) WaitOK(timeout time.Duration) error {
	var last string
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		last = ""
		for _, m := range c.Masters {
			if msg := nodeOK(m.URL, len(c.Masters)); msg != "" {
				last = msg
				break
			}
		}
		if last == "" {
			return nil
		}
	}
	return fmt.Errorf("redis cluster not ok after %s: %s", timeout, last)
}

// nodeOK is "" when the node at url says cluster_state:ok and knows n
// connected masters, else what it says.
func nodeOK(url string, n int) string {
	opts, _ := redis.ParseURL(url)
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := rdb.ClusterInfo(ctx).Result()
	if err != nil {
		return url + ": " + err.Error()
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return url + ": not ok"
	}
	nodes, err := rdb.ClusterNodes(ctx).Result()
	if err != nil {
		return url + ": " + err.Error()
	}
	up := 0
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		f := strings.Fields(line)
		if len(f) >= 8 && strings.Contains(f[2], "master") && !strings.Contains(f[2], "fail") && f[7] == "connected" {
			up++
		}
	}
	if up != n {
		return fmt.Sprintf("%s: %d of %d masters connected", url, up, n)
	}
	return ""
}

// Slot returns the hash slot of key as the cluster computes it (CLUSTER
// KEYSLOT).
func (c *RedisCluster) Slot(t testing.TB, key string) int64 {
	t.Helper()
	n, err := c.Client.ClusterKeySlot(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("CLUSTER KEYSLOT %s: %v", key, err)
	}
	return n
}
