// Package database opens the shop's two stores, PostgreSQL (the system of
// record) and Redis (live state), and applies the schema migrations.
//
// The reasoning behind it is in docs/design/database.md.
package database

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/shop-oss/shop/migrations"
)

// pingTimeout bounds how long opening a store may wait for it to answer.
const pingTimeout = 5 * time.Second

// IdleInTransactionTimeout is how long PostgreSQL lets one of our sessions
// sit idle inside a transaction before it ends the session (see the package
// doc). Far above any wait of ours between two statements, far below what
// a survivor waiting on a stopped process's locks should wait.
const IdleInTransactionTimeout = 15 * time.Second

const idleInTransactionParam = "idle_in_transaction_session_timeout"

// OpenPostgres connects a pool to url and checks that PostgreSQL answers.
// Pool sizes come from the URL (pool_max_conns=...), pgxpool's convention;
// so may idle_in_transaction_session_timeout, which otherwise is
// IdleInTransactionTimeout.
//
// A tracer, when given, sees every query (OpenTelemetry's, when tracing
// is on).
func OpenPostgres(ctx context.Context, url string, tracer ...pgx.QueryTracer) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: invalid SHOP_DATABASE_URL: %w", err)
	}
	if len(tracer) > 0 {
		cfg.ConnConfig.Tracer = tracer[0]
	}
	if cfg.ConnConfig.ConnectTimeout == 0 || cfg.ConnConfig.ConnectTimeout > pingTimeout {
		cfg.ConnConfig.ConnectTimeout = pingTimeout
	}
	if _, set := cfg.ConnConfig.RuntimeParams[idleInTransactionParam]; !set {
		// A startup parameter: set on every connection as it opens, no
		// extra round trip.
		cfg.ConnConfig.RuntimeParams[idleInTransactionParam] = strconv.Itoa(int(IdleInTransactionTimeout.Milliseconds()))
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres unreachable at %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	return pool, nil
}

// Migrate applies every pending migration. A PostgreSQL session advisory
// lock serialises concurrent callers, so several instances may start at once.
// It returns the number of migrations applied by this call.
func Migrate(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	return MigrateDB(ctx, db)
}

// MigrateDB is Migrate over a database/sql handle (goose's interface).
func MigrateDB(ctx context.Context, db *sql.DB) (int, error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithSessionLocker(locker))
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	return len(results), nil
}

// CreateIfMissing creates the database named in url when it does not exist,
// connecting to the server's "postgres" database to do so. It is for
// development set-ups (`make run`); production databases are provisioned.
func CreateIfMissing(ctx context.Context, url string) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("postgres: invalid SHOP_DATABASE_URL: %w", err)
	}
	name := cfg.Database
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("postgres unreachable at %s:%d: %w", cfg.Host, cfg.Port, err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database
		return nil
	}
	if err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}
