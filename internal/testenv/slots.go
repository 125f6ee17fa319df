package testenv

import (
	"context"
	"net"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// ClusterSlots is CLUSTER SLOTS' answer built from CLUSTER SHARDS, which
// replaced it in Redis 7 (go-redis deprecates ClusterSlots): one range per
// slot range, its master's address first, then its replicas but failed ones.
// Tests use it to find the node that holds a key; it also fits
// redis.ClusterOptions.ClusterSlots.
func ClusterSlots(ctx context.Context, node redis.ClusterCmdable) ([]redis.ClusterSlot, error) {
	shards, err := node.ClusterShards(ctx).Result()
	if err != nil {
		return nil, err
	}
	var slots []redis.ClusterSlot
	for _, shard := range shards {
		nodes := shardNodes(shard)
		if len(nodes) == 0 {
			continue
		}
		for _, r := range shard.Slots {
			slots = append(slots, redis.ClusterSlot{Start: int(r.Start), End: int(r.End), Nodes: nodes})
		}
	}
	return slots, nil
}

// shardNodes is a shard's master, then its replicas but failed ones, as CLUSTER
// SLOTS lists them (it skips failed replicas but never the master); nil
// for a shard without a master.
func shardNodes(shard redis.ClusterShard) []redis.ClusterNode {
	var master []redis.ClusterNode
	var replicas []redis.ClusterNode
	for _, n := range shard.Nodes {
		if n.Role != "master" && n.Health == "failed" {
			continue
		}
		host := n.IP
		if host == "" {
			host = n.Endpoint
		}
		node := redis.ClusterNode{ID: n.ID, Addr: net.JoinHostPort(host, strconv.FormatInt(n.Port, 10))}
		if n.Role == "master" {
			master = append(master, node)
		} else {
			replicas = append(replicas, node)
		}
	}
	if len(master) != 1 {
		return nil
	}
	return append(master, replicas...)
}
