// Package outage tells an outage of PostgreSQL or Redis (answered 503,
// retried later) from a bug of ours (a logged 500), however deeply the
// error is wrapped.
package outage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"
)

// Is reports whether err, from PostgreSQL or Redis however deeply
// wrapped, means the store cannot serve the request now: an outage, which
// the shop answers 503 with Retry-After, and which a retry later may pass.
// Anything else is a bug of ours (a SQL or Lua error, a wrong arity, an
// unknown column, a reply we cannot parse) and must stay a logged 500, so
// it is false for those; it is false for nil, redis.Nil and pgx.ErrNoRows.
//
// An error the server replied with is judged by what it says, even when
// it comes wrapped together with a timeout:
//
//   - PostgreSQL: SQLSTATE class 08 (connection exception), class 53
//     (insufficient resources: too many connections, disk full, out of
//     memory), 57P01-57P05 (shutting down, crashed, starting up) and 57014
//     (a statement cancelled, by statement_timeout or a cancel request).
//   - Redis: LOADING, BUSY (a script or module runs too long), MASTERDOWN,
//     READONLY (a failed-over primary), NOREPLICAS, OOM, CLUSTERDOWN,
//     TRYAGAIN, and "max number of clients reached"; an EXECABORT is judged
//     by the refusal that caused it (see TxError), so a MULTI refused for
//     OOM is an outage and one refused for a wrong arity is a bug.
//
// Otherwise the transport decides: a network error or timeout (dial
// refused, reset, i/o timeout), an unexpected EOF, a connection that never
// connected (pgconn.ConnectError), a cluster node's lost reply
// (ReplyLost), a context that ended (its deadline, or a
// cancellation by shutdown), a closed or exhausted pool.
func Is(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) {
		return false
	}
	var tx *txAbort
	if errors.As(err, &tx) {
		return Is(tx.cause)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgOutage(pgErr.Code)
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return redisOutage(rerr.Error())
	}
	return transportFailure(err)
}

// pgOutage tells the SQLSTATEs of a server that cannot serve now.
func pgOutage(code string) bool {
	switch {
	case strings.HasPrefix(code, "08"), strings.HasPrefix(code, "53"):
		return true
	case code >= "57P01" && code <= "57P05", code == "57014":
		return true
	}
	return false
}

// redisOutages are the reply prefixes of a Redis that cannot serve now,
// each with the space that ends the code: BUSYGROUP and BUSYKEY are
// answers about data (a bug of ours if unexpected), not a busy server.
var redisOutages = []string{
	"LOADING ", "BUSY ", "MASTERDOWN ", "READONLY ", "NOREPLICAS ", "OOM ",
	"CLUSTERDOWN ", "TRYAGAIN ", "ERR max number of clients reached",
	// A slot moving or moved: the cluster client follows these redirects,
	// so one reaching us means it gave up (its redirects ran out during a
	// reshard or a failover): the cluster cannot serve the key now.
	"MOVED ", "ASK ",
}

func redisOutage(msg string) bool {
	for _, p := range redisOutages {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// transportFailure: the store was not reached, or did not answer in time.
func transportFailure(err error) bool {
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	var lost *ReplyLost
	switch {
	case errors.As(err, &lost):
		return true
	case errors.As(err, &netErr), errors.As(err, &connectErr), pgconn.Timeout(err):
		return true
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, pgconn.ErrConnClosed):
		return true
	case errors.Is(err, redis.ErrClosed), errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrPoolExhausted):
		return true
	}
	// pgxpool's "closed pool" (puddle.ErrClosedPool, not re-exported):
	// the process is shutting down.
	return err.Error() == "closed pool" || strings.HasSuffix(err.Error(), ": closed pool")
}

// TxError returns the error of a MULTI/EXEC (TxPipelined) with the reason
// Redis discarded it. An EXECABORT alone does not say why: the refusal is
// in the queued commands (cmds), an OOM or a READONLY when Redis cannot
// write, a wrong arity when the code is wrong. TxError attaches the first
// such refusal, so that Is judges the transaction by it. Any
// other err is returned as it is.
func TxError(cmds []redis.Cmder, err error) error {
	if !redis.IsExecAbortError(err) {
		return err
	}
	for _, c := range cmds {
		if cerr := c.Err(); cerr != nil && !redis.IsExecAbortError(cerr) {
			return &txAbort{abort: err, cause: cerr}
		}
	}
	return err
}

// txAbort is an EXECABORT with the queued command's refusal that caused it.
type txAbort struct{ abort, cause error }

func (e *txAbort) Error() string   { return e.abort.Error() + " (" + e.cause.Error() + ")" }
func (e *txAbort) Unwrap() []error { return []error{e.abort, e.cause} }

// Wrap names the operation that failed and, when err is an outage, wraps
// down too (the caller's 503, an *apperr.Error): one rule for every package,
// so that an outage answers 503 and a bug stays a logged 500.
func Wrap(op string, down, err error) error {
	if !Is(err) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w: %w", op, down, err)
}

// ReplyLost is a command that may have run on a cluster node whose reply
// never came (a reset connection, a read timeout). It is deliberately not
// an io.EOF or a net.Error to errors.Is and errors.As, so that go-redis's
// cluster client does not send the command again; Is counts it as
// an outage (a 503 the client retries with its Idempotency-Key).
type ReplyLost struct {
	Addr  string
	Cause string
}

func (e *ReplyLost) Error() string {
	return "redis " + e.Addr + ": reply lost, the command may have run: " + e.Cause
}
