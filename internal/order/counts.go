package order

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// countByUserSQL counts the persisted orders of each of the users $1.
const countByUserSQL = `SELECT user_id::text, count(*) FROM orders WHERE user_id = ANY($1::uuid[]) GROUP BY user_id`

// CountByUser returns how many orders each of the users (canonical ids)
// has in PostgreSQL, every status; a user without orders is absent. An
// order not yet persisted by the writer (pending, milliseconds) is not
// counted. Errors: a 503 when PostgreSQL does not answer.
func (s *Service) CountByUser(ctx context.Context, users []string) (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	rows, _ := s.db.Query(ctx, countByUserSQL, users)
	counts := make(map[string]int64, len(users))
	var id string
	var n int64
	_, err := pgx.ForEachRow(rows, []any{&id, &n}, func() error {
		counts[id] = n
		return nil
	})
	if err != nil {
		return nil, s.unavailable("count orders", err)
	}
	return counts, nil
}
