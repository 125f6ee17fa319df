package pickup

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/shop-oss/shop/internal/outage"
)

const (
	upsertSQL = `
INSERT INTO stores (id, name, address, lng, lat) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id) DO UPDATE SET name = excluded.name, address = excluded.address,
    lng = excluded.lng, lat = excluded.lat, updated_at = now()
RETURNING id, name, address, lng, lat`

	deleteSQL = `DELETE FROM stores WHERE id = $1`

	selectSQL = `SELECT id, name, address, lng, lat FROM stores WHERE id = $1`

	selectAllSQL = `SELECT id, name, address, lng, lat FROM stores ORDER BY id`
)

func (s *Service) upsert(ctx context.Context, st Store) (Store, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	rows, _ := s.db.Query(ctx, upsertSQL, st.ID, st.Name, st.Address, st.Lng, st.Lat)
	out, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[Store])
	if err != nil {
		return Store{}, dbError("put store "+st.ID, err)
	}
	return out, nil
}

func (s *Service) remove(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	tag, err := s.db.Exec(ctx, deleteSQL, id)
	if err != nil {
		return dbError("delete store "+id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete store %s: %w", id, ErrNotFound)
	}
	return nil
}

func (s *Service) selectOne(ctx context.Context, id string) (Store, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	rows, _ := s.db.Query(ctx, selectSQL, id)
	st, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[Store])
	if errors.Is(err, pgx.ErrNoRows) {
		return Store{}, fmt.Errorf("store %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Store{}, dbError("get store "+id, err)
	}
	return st, nil
}

func (s *Service) selectAll(ctx context.Context) ([]Store, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	rows, _ := s.db.Query(ctx, selectAllSQL)
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Store])
	if err != nil {
		return nil, dbError("list stores", err)
	}
	return all, nil
}

// dbError wraps err from PostgreSQL: an outage answers 503, anything else
// (a statement the server refused, a scan bug) stays an internal error.
func dbError(op string, err error) error { return outage.Wrap(op, errDatabaseDown, err) }
