package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/database"
)

// RedisCluster is a Redis Cluster private to one test: masters only, or
// with one replica each (StartClusterWithReplicas), each a redis-server
// with cluster mode and AOF on (appendfsync always, as production), on
// free ports, each in its own directory with its nodes.conf. Kill and
// Restart crash and bring back one master on its AOF and nodes.conf;
// MoveSlot reshards one slot; Failover promotes a replica, TakeOver one
// whose master is dead. Everything is killed when t ends.
type RedisCluster struct {
	// URL is SHOP_REDIS_URL for SHOP_REDIS_CLUSTER=true: the first master,
	// the others as ?addr= seeds.
	URL     string
	Masters []*RedisProcess
	// Replicas is empty but for StartClusterWithReplicas: one replica per
	// master, not in the masters' order. After Failover a replica may be a
	// master and a master a replica; the fields keep the start's roles.
	Replicas []*RedisProcess
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
	return startCluster(t, masters, false)
}

// StartClusterWithReplicas is StartCluster with one replica per master
// (masters >= 3), each with the same settings: Failover promotes one.
func StartClusterWithReplicas(t testing.TB, masters int) *RedisCluster {
	t.Helper()
	if masters < 3 {
		t.Fatalf("StartClusterWithReplicas: 3 masters and more, not %d", masters)
	}
	return startCluster(t, masters, true)
}

// OpenCluster opens a cluster client on c as `shop serve` opens one
// (database.OpenCluster, default options), closed when t ends.
func OpenCluster(t testing.TB, c *RedisCluster) *redis.ClusterClient {
	t.Helper()
	rdb, err := database.OpenCluster(context.Background(), c.URL, database.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// StartOpenCluster is StartCluster with a client opened on it as OpenCluster
// opens one: what most tests of code that runs on a cluster begin with.
func StartOpenCluster(t testing.TB, masters int) (*RedisCluster, *redis.ClusterClient) {
	t.Helper()
	c := StartCluster(t, masters)
	return c, OpenCluster(t, c)
}

func startCluster(t testing.TB, masters int, replicas bool) *RedisCluster {
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
	nodes := masters
	if replicas {
		nodes *= 2
	}
	addrs := make([]string, nodes)
	for i := range nodes {
		// The cluster bus port is given explicitly: the default, port +
		// 10000, may be taken or past 65535.
		// The address is announced: a node alone (one master) never
		// learns its own from a peer and would report "" in CLUSTER SLOTS.
		p := StartRedis(t, "--cluster-enabled", "yes", "--cluster-port", freePort(t), "--cluster-announce-ip", "127.0.0.1",
			"--cluster-node-timeout", "2000", "--appendonly", "yes", "--appendfsync", "always")
		if i < masters {
			c.Masters = append(c.Masters, p)
		} else {
			c.Replicas = append(c.Replicas, p)
		}
		addrs[i] = addrOf(p.URL)
	}
	// redis-cli makes the first nodes the masters, the rest their replicas.
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", fmt.Sprint(len(c.Replicas)/masters), "--cluster-yes")
	if masters == 1 {
		host, port, _ := strings.Cut(addrs[0], ":")
		args = []string{"-h", host, "-p", port, "CLUSTER", "ADDSLOTSRANGE", "0", fmt.Sprint(16383)}
	}
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil || (masters == 1 && !strings.Contains(string(out), "OK")) {
		t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	c.URL = "redis://" + addrs[0]
	for i, a := range addrs[1:masters] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		c.URL += sep + "addr=" + a
	}
	if err := c.WaitOK(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.waitReplicas(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	c.Client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs[:masters]})
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

// WaitOK waits until every running master (one killed and not restarted
// is skipped) reports cluster_state:ok and sees the cluster's count of
// masters connected, or timeout passes.
func (c *RedisCluster) WaitOK(timeout time.Duration) error {
	var last string
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		last = ""
		for _, m := range c.Masters {
			if m.down() {
				continue
			}
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
		// Flags are a comma list: "nofailover" is no "fail".
		flags := strings.Split(f[2], ",")
		if len(f) >= 8 && slices.Contains(flags, "master") && !slices.Contains(flags, "fail") && !slices.Contains(flags, "fail?") && f[7] == "connected" {
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

// MoveSlot hands slot over to master to, keys and all, the way a
// resharding does (CLUSTER SETSLOT IMPORTING and MIGRATING, MIGRATE of
// every key, CLUSTER SETSLOT NODE on every master, the target first), and
// waits until the cluster is ok again. It returns the index of the master
// that owned the slot. It may be called from any goroutine, so it returns
// an error rather than failing a test.
func (c *RedisCluster) MoveSlot(slot int64, to int) (from int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes := make([]*redis.Client, len(c.Masters))
	ids := make([]string, len(c.Masters))
	from = -1
	for i, m := range c.Masters {
		opts, _ := redis.ParseURL(m.URL)
		nodes[i] = redis.NewClient(opts)
		defer nodes[i].Close()
		if ids[i], err = nodes[i].ClusterMyID(ctx).Result(); err != nil {
			return -1, fmt.Errorf("CLUSTER MYID of master %d: %w", i, err)
		}
		if owns(ctx, nodes[i], slot) {
			from = i
		}
	}
	switch {
	case from < 0:
		return -1, fmt.Errorf("no master owns slot %d", slot)
	case from == to:
		return from, fmt.Errorf("slot %d is on master %d already", slot, to)
	}
	src, dst := nodes[from], nodes[to]
	if err := dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[from]).Err(); err != nil {
		return from, fmt.Errorf("SETSLOT IMPORTING: %w", err)
	}
	if err := src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to]).Err(); err != nil {
		return from, fmt.Errorf("SETSLOT MIGRATING: %w", err)
	}
	host, port, _ := strings.Cut(dst.Options().Addr, ":")
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, int(slot), 100).Result()
		if err != nil {
			return from, fmt.Errorf("GETKEYSINSLOT: %w", err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.Do(ctx, args...).Err(); err != nil {
			return from, fmt.Errorf("MIGRATE: %w", err)
		}
	}
	// The target first, so that it owns the slot before the source
	// redirects to it; then the others, rather than waiting for gossip.
	order := []int{to, from}
	for i := range c.Masters {
		if i != to && i != from {
			order = append(order, i)
		}
	}
	for _, i := range order {
		if err := nodes[i].Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", ids[to]).Err(); err != nil {
			return from, fmt.Errorf("SETSLOT NODE on master %d: %w", i, err)
		}
	}
	return from, c.WaitOK(30 * time.Second)
}

// owns is whether node serves slot, by its own CLUSTER SLOTS.
func owns(ctx context.Context, node *redis.Client, slot int64) bool {
	slots, err := ClusterSlots(ctx, node)
	if err != nil {
		return false
	}
	myself := node.Options().Addr
	for _, r := range slots {
		if int64(r.Start) <= slot && slot <= int64(r.End) && len(r.Nodes) > 0 && r.Nodes[0].Addr == myself {
			return true
		}
	}
	return false
}

// waitReplicas waits until every replica has its master's data in sync
// (master_link_status:up), or timeout passes.
func (c *RedisCluster) waitReplicas(timeout time.Duration) error {
	for _, r := range c.Replicas {
		opts, _ := redis.ParseURL(r.URL)
		rdb := redis.NewClient(opts)
		err := waitUntil(timeout, func() string {
			info, err := rdb.Info(context.Background(), "replication").Result()
			switch {
			case err != nil:
				return err.Error()
			case !strings.Contains(info, "master_link_status:up"):
				return r.URL + ": replica not in sync"
			}
			return ""
		})
		_ = rdb.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// Failover promotes the replica of the master that serves slot with
// CLUSTER FAILOVER (the planned kind: the replica waits until it has every
// write), and waits until it serves the slot and the cluster is ok. It may
// be called from any goroutine, so it returns an error rather than failing
// a test.
func (c *RedisCluster) Failover(slot int64) error {
	return c.promote(slot)
}

// TakeOver promotes the replica of the master that served slot with
// CLUSTER FAILOVER TAKEOVER, as an operator does once that master is dead
// (Kill): without its consent nor the other masters' votes. Whatever the
// master had not replicated is lost. It waits until the replica serves the
// slot and every running master says the cluster is ok, and may be called
// from any goroutine.
func (c *RedisCluster) TakeOver(slot int64) error {
	return c.promote(slot, "TAKEOVER")
}

// ReplicaOf is the node replicating the master that serves slot now, by
// the running nodes' own word (CLUSTER NODES: CLUSTER SLOTS leaves out a
// replica whose offset its peers have not heard of yet).
func (c *RedisCluster) ReplicaOf(slot int64) (*RedisProcess, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, r := range append(slices.Clone(c.Replicas), c.Masters...) {
		if r.down() {
			continue
		}
		opts, _ := redis.ParseURL(r.URL)
		rdb := redis.NewClient(opts)
		master, err := servedBy(ctx, rdb, slot)
		_ = rdb.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.URL, err)
		}
		if master != "" {
			return r, nil
		}
	}
	return nil, fmt.Errorf("no replica of slot %d's master", slot)
}

// servedBy is the id of the master node replicates when that master
// serves slot, by node's CLUSTER NODES; "" when node is no such replica.
func servedBy(ctx context.Context, node *redis.Client, slot int64) (string, error) {
	nodes, err := node.ClusterNodes(ctx).Result()
	if err != nil {
		return "", fmt.Errorf("CLUSTER NODES: %w", err)
	}
	var master string
	serving := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		if flags := strings.Split(f[2], ","); slices.Contains(flags, "myself") && slices.Contains(flags, "slave") {
			master = f[3]
		}
		for _, r := range f[8:] {
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			var a, b int64
			if _, err := fmt.Sscan(lo, &a); err != nil {
				continue // an importing or migrating slot: [slot->-id]
			}
			if _, err := fmt.Sscan(hi, &b); err == nil && a <= slot && slot <= b {
				serving[f[0]] = true
			}
		}
	}
	if master == "" || !serving[master] {
		return "", nil
	}
	return master, nil
}

// promote runs CLUSTER FAILOVER [mode] on the replica of slot's master.
func (c *RedisCluster) promote(slot int64, mode ...any) error {
	r, err := c.ReplicaOf(slot)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts, _ := redis.ParseURL(r.URL)
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	if err := rdb.Do(ctx, append([]any{"CLUSTER", "FAILOVER"}, mode...)...).Err(); err != nil {
		return fmt.Errorf("CLUSTER FAILOVER %v on %s: %w", mode, r.URL, err)
	}
	if err := waitUntil(30*time.Second, func() string {
		if !owns(ctx, rdb, slot) {
			return r.URL + " does not serve the slot yet"
		}
		return ""
	}); err != nil {
		return err
	}
	return c.WaitOK(30 * time.Second)
}

func addrOf(url string) string {
	return strings.TrimSuffix(strings.TrimPrefix(url, "redis://"), "/0")
}

// waitUntil polls check until it returns "" or timeout passes; the error
// is check's last word.
func waitUntil(timeout time.Duration, check func() string) error {
	var last string
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if last = check(); last == "" {
			return nil
		}
	}
	return fmt.Errorf("not done after %s: %s", timeout, last)
}
