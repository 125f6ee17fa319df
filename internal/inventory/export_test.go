package inventory

import "github.com/jackc/pgx/v5/pgxpool"

// SetAfterRecord sets the hook Sales.Open calls between its PostgreSQL
// record and its Redis step (for the external tests).
func SetAfterRecord(s *Sales, f func()) { s.afterRecord = f }

// SaleWaiters is how many admin writes of sku on db wait in the process
// for their turn at its sale lock.
func SaleWaiters(db *pgxpool.Pool, sku string) int { return gatesOf(db).waiting(sku) }
