package inventory

import "github.com/jackc/pgx/v5/pgxpool"

// SaleWaiters is how many admin writes of sku on db wait in the process
// for their turn at its sale lock.
func SaleWaiters(db *pgxpool.Pool, sku string) int { return gatesOf(db).waiting(sku) }
