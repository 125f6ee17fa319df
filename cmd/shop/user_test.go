package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shop-oss/shop/internal/auth"
	"github.com/shop-oss/shop/internal/testenv"
)

func TestUserAdd(t *testing.T) {
	t.Parallel()
	db := testenv.NewDatabase(t)
	env := map[string]string{"SHOP_DATABASE_URL": db.URL, "SHOP_LOG_LEVEL": "warn"}
	shop := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(context.Background(), append([]string{"user", "add"}, args...), func(k string) string { return env[k] }, &out, &errb)
		return out.String(), err
	}

	out, err := shop("--email", "Root@Example.com", "--password", "correct horse", "--name", "Root", "--role", "admin")
	if err != nil {
		t.Fatalf("user add: %v", err)
	}
	id := strings.TrimSpace(out)
	if uuid.Validate(id) != nil {
		t.Fatalf("stdout = %q, want the new user's id", out)
	}
	var email, role, name string
	if err := db.Pool.QueryRow(context.Background(), "SELECT email, role, name FROM users WHERE id = $1", id).Scan(&email, &role, &name); err != nil {
		t.Fatal(err)
	}
	if email != "Root@Example.com" || role != "admin" || name != "Root" {
		t.Errorf("stored %s %s %s", email, role, name)
	}
	if _, err := shop("--email", "ada@example.com", "--password", "correct horse"); err != nil {
		t.Errorf("a shopper without --role: %v", err)
	}

	tests := []struct {
		name string
		args []string
		want string // in the one-line error
	}{
		{"duplicate_other_case", []string{"--email", "root@example.COM", "--password", "another one"}, `a user with email "root@example.COM" already exists`},
		{"invalid_email", []string{"--email", "root", "--password", "correct horse"}, "invalid input: --email must be a valid email address"},
		{"short_password", []string{"--email", "x@example.com", "--password", "short"}, "--password must be at least 8 characters"},
		{"unknown_role", []string{"--email", "x@example.com", "--password", "correct horse", "--role", "root"}, "--role must be shopper or admin"},
		{"missing_email", []string{"--password", "correct horse"}, `required flag(s) "email" not set`},
		{"missing_password", []string{"--email", "x@example.com"}, `required flag(s) "password" not set`},
		{"stray_argument", []string{"--email", "x@example.com", "--password", "correct horse", "extra"}, "unknown command"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := shop(tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line containing %q", err, tc.want)
			}
			if out != "" {
				t.Errorf("printed %q on failure", out)
			}
		})
	}
	var n int
	if err := db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM users").Scan(&n); err != nil || n != 2 {
		t.Errorf("users = %d (%v), want 2: a refused command wrote something", n, err)
	}
}

func TestUserNeedsASubcommand(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"user"}, {"user", "ad"}} {
		var out, errb bytes.Buffer
		if err := run(context.Background(), args, func(string) string { return "" }, &out, &errb); err == nil {
			t.Errorf("shop %v succeeded", args)
		}
	}
}

func TestUserAddUnreachableDatabase(t *testing.T) {
	t.Parallel()
	getenv := func(k string) string {
		if k == "SHOP_DATABASE_URL" {
			return "postgres://postgres@127.0.0.1:1/shop?sslmode=disable"
		}
		return ""
	}
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"user", "add", "--email", "a@example.com", "--password", "correct horse"}, getenv, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "postgres unreachable") {
		t.Fatalf("err = %v, want postgres unreachable", err)
	}
}

func TestUserDelete(t *testing.T) {
	t.Parallel()
	db := testenv.NewDatabase(t)
	r := testenv.NewRedis(t)
	env := map[string]string{"SHOP_DATABASE_URL": db.URL, "SHOP_REDIS_URL": r.URL, "SHOP_KEY_PREFIX": r.Prefix,
		"SHOP_LOG_LEVEL": "warn", "SHOP_ENV": "dev"}
	shop := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(context.Background(), append([]string{"user"}, args...), func(k string) string { return env[k] }, &out, &errb)
		return strings.TrimSpace(out.String()), err
	}
	id, err := shop("add", "--email", "a@example.com", "--password", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := shop("delete", "--email", "A@example.com"); err != nil || got != id {
		t.Fatalf("delete --email: %q %v, want %s", got, err, id)
	}
	id2, _ := shop("add", "--email", "a@example.com", "--password", "correct horse") // the email is free again
	if got, err := shop("delete", "--id", id2); err != nil || got != id2 {
		t.Fatalf("delete --id: %q %v", got, err)
	}
	for _, args := range [][]string{{"delete", "--id", id2}, {"delete", "--email", "nobody@example.com"}, {"delete"}, {"delete", "--id", id, "--email", "a@example.com"}} {
		if _, err := shop(args...); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: err = %v, want one line", args, err)
		}
	}
	// Any case, no dashes: the same user, every session revoked; any
	// other spelling is not found and erases nothing.
	id3, _ := shop("add", "--email", "b@example.com", "--password", "correct horse")
	users := auth.New(db.Pool, r.Client, auth.Config{Secret: []byte("user-delete-test-secret-0123456789"),
		KeyPrefix: r.Prefix, AccessTTL: time.Minute, SessionTTL: time.Hour}, slog.New(slog.DiscardHandler), nil)
	ctx := context.Background()
	tok, err := users.Login(ctx, "b@example.com", "correct horse", "phone")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"urn:uuid:" + id3, "{" + id3 + "}"} {
		if _, err := shop("delete", "--id", bad); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("delete --id %s: %v, want not found", bad, err)
		}
	}
	if _, err := users.Refresh(ctx, tok.RefreshToken); err != nil {
		t.Fatalf("refresh before the erasure: %v", err)
	}
	tok, _ = users.Login(ctx, "b@example.com", "correct horse", "phone")
	if got, err := shop("delete", "--id", strings.ToUpper(strings.ReplaceAll(id3, "-", ""))); err != nil || got != id3 {
		t.Fatalf("delete --id in upper case without dashes: %q %v, want %s", got, err, id3)
	}
	if _, err := users.Refresh(ctx, tok.RefreshToken); err == nil {
		t.Fatal("the erased user's refresh token still rotates")
	}
	var erased int
	if err := db.Pool.QueryRow(ctx, "SELECT count(*) FROM users WHERE deleted_at IS NOT NULL").Scan(&erased); err != nil || erased != 3 {
		t.Fatalf("erased rows %d %v, want 3", erased, err)
	}
}
