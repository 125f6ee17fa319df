// Package autopipe runs the purchase path's scripts on go-redis's
// auto-pipeliner (SHOP_REDIS_PIPELINE): the calls of concurrent requests
// share round trips, and each call still ends by its own deadline.
package autopipe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Options tune the auto-pipelining of the purchase path's scripts
// (SHOP_REDIS_PIPELINE*): the calls of concurrent requests share round
// trips and syscalls.
type Options struct {
	// Batches is how many batches may be in flight at once; above 1 they
	// run in no particular order (each caller still waits for its own).
	Batches int
	// Delay is the longest a batch waits for more commands (0: none).
	Delay time.Duration
	// Adaptive shortens Delay as the queue fills.
	Adaptive bool
}

// New returns a Scripter that runs scripts on rdb's
// auto-pipeliner (go-redis, the deferred face) and waits for each no longer
// than its context allows: go-redis itself ignores a queued command's
// deadline (the 2 s read and write timeouts would bound it), and a stalled
// Redis must still answer each route within its own timeout. A wait cut
// short leaves the command to run or not, an unknown outcome like any
// timeout's. A batch that fails on a network error is never resent
// (database.OpenRedis's MaxRetries -1).
func New(rdb redis.UniversalClient, o Options) (redis.Scripter, error) {
	ap, ok := rdb.(interface {
		AsyncAutoPipelineWithOptions(*redis.AutoPipelineOptions) (*redis.AutoPipeliner, error)
	})
	if !ok {
		return nil, fmt.Errorf("redis: %T has no auto-pipelining", rdb)
	}
	cfg := redis.DefaultAutoPipelineOptions()
	cfg.MaxConcurrentBatches = max(o.Batches, 1)
	cfg.Unordered = o.Batches > 1
	cfg.MaxFlushDelay = o.Delay
	cfg.AdaptiveDelay = o.Adaptive && o.Delay > 0
	p, err := ap.AsyncAutoPipelineWithOptions(cfg)
	if err != nil {
		return nil, err
	}
	return pipelined{p}, nil
}

// pipelined is New's Scripter.
type pipelined struct{ ap *redis.AutoPipeliner }

func (p pipelined) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return p.run(ctx, "eval", script, keys, args)
}

func (p pipelined) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return p.run(ctx, "evalsha", sha1, keys, args)
}

func (p pipelined) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return p.run(ctx, "eval_ro", script, keys, args)
}

func (p pipelined) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return p.run(ctx, "evalsha_ro", sha1, keys, args)
}

func (p pipelined) ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd {
	return p.ap.ScriptExists(ctx, hashes...)
}

func (p pipelined) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	return p.ap.ScriptLoad(ctx, script)
}

var tracer = otel.Tracer("github.com/shop-oss/shop/internal/autopipe")

// run queues one script call and waits for it until ctx is done. A wait
// cut short returns a command of its own holding ctx's error: the queued
// one may still be written by its batch.
func (p pipelined) run(ctx context.Context, name, payload string, keys []string, args []any) *redis.Cmd {
	cmdArgs := make([]any, 0, 3+len(keys)+len(args))
	cmdArgs = append(cmdArgs, name, payload, len(keys))
	for _, k := range keys {
		cmdArgs = append(cmdArgs, k)
	}
	cmd := redis.NewCmd(ctx, append(cmdArgs, args...)...)
	if trace.SpanContextFromContext(ctx).IsValid() {
		// The batch is written from the pipeliner's goroutine, outside
		// the caller's trace: the call's own span stands in for it, from
		// queueing to its reply (only when the caller is traced).
		var span trace.Span
		ctx, span = tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("db.system.name", "redis"), attribute.Bool("shop.auto_pipelined", true)))
		defer func() {
			if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			}
			span.End()
		}()
	}
	f := p.ap.Submit(ctx, cmd)
	if err := f.WaitContext(ctx); err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		late := redis.NewCmd(ctx, cmdArgs...)
		late.SetErr(err)
		return late
	}
	return cmd
}
