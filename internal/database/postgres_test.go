package database_test

import (
	"context"
	"testing"

	"github.com/shop-oss/shop/internal/database"
	"github.com/shop-oss/shop/internal/testenv"
)

// Every connection of an opened pool ends a session idle inside a
// transaction after IdleInTransactionTimeout, so that a stopped process
// cannot hold row locks for good; a URL that sets its own value keeps it.
func TestOpenPostgresSetsIdleInTransactionTimeout(t *testing.T) {
	t.Parallel()
	db := testenv.NewDatabase(t)
	for _, tc := range []struct {
		name, url, want string
	}{
		{"default", db.URL, "15s"},
		{"from_url", db.URL + "&idle_in_transaction_session_timeout=60000", "1min"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			pool, err := database.OpenPostgres(ctx, tc.url)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			var got string
			if err := pool.QueryRow(ctx, "SHOW idle_in_transaction_session_timeout").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("idle_in_transaction_session_timeout = %s, want %s", got, tc.want)
			}
		})
	}
}
