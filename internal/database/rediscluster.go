package database

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/outage"
)

// OpenUniversal opens the shop's Redis as SHOP_REDIS_CLUSTER says: one
// server (OpenRedis) or a Redis Cluster (OpenCluster). Everything past
// opening takes a redis.UniversalClient, so the same code runs on both.
func OpenUniversal(ctx context.Context, url string, cluster bool, o RedisOptions) (redis.UniversalClient, error) {
	if cluster {
		return OpenCluster(ctx, url, o)
	}
	return OpenRedis(ctx, url, o)
}

// OpenCluster builds a Redis Cluster client from url, a seed node with more
// seeds as ?addr=host:port parameters (go-redis ParseClusterURL), and checks
// that every master answers. MOVED and ASK are followed (a resharded or
// failed-over slot), but a command is never sent again once it may have
// reached a server: go-redis resends one whose reply was lost to a reset
// connection or a read timeout, which for ours (a reservation without an
// Idempotency-Key, an XREADGROUP, a cart increment) would do the work twice.
// noResend turns those transport errors into a *outage.ReplyLost that go-redis does
// not retry and Unavailable counts as an outage. That covers single commands
// and scripts, not pipelines: go-redis decides to resend a cluster pipeline's
// commands inside the node's call, before a hook sees the error.
// More in docs/design/database.md ("rediscluster.go").
func OpenCluster(ctx context.Context, url string, o RedisOptions) (*redis.ClusterClient, error) {
	opts, err := ParseClusterURL(url)
	if err != nil {
		return nil, err
	}
	opts.DialTimeout = 2 * time.Second
	opts.ReadTimeout = 2 * time.Second
	opts.WriteTimeout = 2 * time.Second
	opts.PoolTimeout = 3 * time.Second
	opts.MaxRetries = -1 // per node: no resend inside a node's client either
	opts.ContextTimeoutEnabled = true
	if o.PoolSize > 0 {
		opts.PoolSize = o.PoolSize
	}
	rdb := redis.NewClusterClient(opts)
	reload := func() { rdb.ReloadState(context.Background()) }
	rdb.OnNewNode(func(node *redis.Client) {
		node.AddHook(noResend{addr: node.Options().Addr})
		node.AddHook(reloadOnFailure{reload: reload})
	})
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	err = rdb.ForEachMaster(pctx, func(ctx context.Context, node *redis.Client) error {
		if err := node.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("master %s: %w", node.Options().Addr, err)
		}
		return nil
	})
	if err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis cluster unreachable at %s: %w", strings.Join(opts.Addrs, ","), err)
	}
	return rdb, nil
}

// ParseClusterURL reads SHOP_REDIS_URL in cluster mode: redis:// or
// rediss://, database 0 (a cluster has no other), seeds as ?addr=.
func ParseClusterURL(url string) (*redis.ClusterOptions, error) {
	opts, err := redis.ParseClusterURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis: invalid SHOP_REDIS_URL for SHOP_REDIS_CLUSTER=true: %w", err)
	}
	if db := clusterDB(url); db != "" && db != "0" {
		return nil, fmt.Errorf("redis: invalid SHOP_REDIS_URL for SHOP_REDIS_CLUSTER=true: database %s (a cluster has only database 0)", db)
	}
	return opts, nil
}

// clusterDB is the database number of a URL's path ("" for none).
func clusterDB(url string) string {
	rest := url
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	rest, _, _ = strings.Cut(rest, "?")
	_, path, _ := strings.Cut(rest, "/")
	return strings.Trim(path, "/")
}

// noResend is the hook on every cluster node's client that makes a lost
// reply a *outage.ReplyLost (see OpenCluster).
type noResend struct{ addr string }

func (noResend) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h noResend) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if lost := h.lost(err); lost != nil {
			cmd.SetErr(lost)
			return lost
		}
		return err
	}
}

func (h noResend) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			if lost := h.lost(c.Err()); lost != nil {
				c.SetErr(lost)
			}
		}
		if lost := h.lost(err); lost != nil {
			return lost
		}
		return err
	}
}

// reloadOnFailure is the hook on every cluster node's client that asks
// for a fresh slot map when the node fails to answer (see OpenCluster).
// go-redis coalesces the requests (one reload at a time, 200 ms apart),
// so an outage costs a CLUSTER SLOTS now and then, not one per command.
type reloadOnFailure struct{ reload func() }

func (reloadOnFailure) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reloadOnFailure) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if unanswered(err) {
			h.reload()
		}
		return err
	}
}

func (h reloadOnFailure) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if unanswered(err) {
			h.reload()
		}
		return err
	}
}

// unanswered is an error that is no reply of the server's and not the
// caller giving up: a refused dial, a lost reply, a timeout.
func unanswered(err error) bool {
	var rerr redis.Error
	switch {
	case err == nil, errors.As(err, &rerr), errors.Is(err, redis.Nil), errors.Is(err, context.Canceled):
		return false
	}
	return true
}

// lost tells the transport errors after which the command may have run:
// not a dial error (nothing was sent), not a context's end (go-redis does
// not resend those), not a reply of the server's.
func (h noResend) lost(err error) error {
	if err == nil {
		return nil
	}
	var rerr redis.Error
	var opErr *net.OpError
	switch {
	case errors.As(err, &rerr), errors.Is(err, redis.Nil):
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return nil
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return nil
	}
	var netErr net.Error
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &netErr) {
		return &outage.ReplyLost{Addr: h.addr, Cause: err.Error()}
	}
	return nil
}
