package testenv

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"io/fs"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver pgtestdb uses
	"github.com/peterldowns/pgtestdb"

	"github.com/shop-oss/shop/internal/database"
	"github.com/shop-oss/shop/migrations"
)

// Database is a fresh, migrated database private to one test.
type Database struct {
	Pool *pgxpool.Pool
	// URL connects to this database (for a `shop` process under test).
	URL string
}

// NewDatabase clones a migrated template database for t. The template is
// made once per migration set (pgtestdb keys it by the migrations' hash);
// the clone is dropped when t passes and kept for inspection when it fails.
func NewDatabase(t testing.TB) *Database {
	t.Helper()
	admin := DatabaseURL(t)
	conf := pgtestdb.Custom(t, pgtestdbConfig(t, admin), migrator{})
	pool, err := pgxpool.New(context.Background(), conf.URL())
	if err != nil {
		t.Fatalf("connect to test database: %v", err)
	}
	t.Cleanup(pool.Close)
	return &Database{Pool: pool, URL: conf.URL()}
}

func pgtestdbConfig(t testing.TB, admin string) pgtestdb.Config {
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("parse %s: %v", envDatabase, err)
	}
	pass, _ := u.User.Password()
	db := u.Path
	if len(db) > 1 {
		db = db[1:]
	} else {
		db = "postgres"
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	return pgtestdb.Config{
		DriverName: "pgx",
		Host:       u.Hostname(),
		Port:       port,
		User:       u.User.Username(),
		Password:   pass,
		Database:   db,
		Options:    "sslmode=disable",
		// A test that leaks a connection (a killed server) must not keep
		// its database from being dropped.
		ForceTerminateConnections: true,
	}
}

// migrator applies the shop's embedded goose migrations to pgtestdb's
// template database.
type migrator struct{}

func (migrator) Hash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		if err != nil {
			return err
		}
		h.Write([]byte(path))
		h.Write(b)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}

func (migrator) Migrate(ctx context.Context, db *sql.DB, _ pgtestdb.Config) error {
	_, err := database.MigrateDB(ctx, db)
	return err
}
