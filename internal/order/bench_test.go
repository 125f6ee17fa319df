package order

import (
	"context"
	"sync"
	"testing"

	"github.com/google/uuid"
)

// benchUsers inserts n users (orders reference them) and returns their ids.
func benchUsers(b *testing.B, svc *Service, n int) []string {
	b.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.NewString()
		_, err := svc.db.Exec(context.Background(),
			`INSERT INTO users (id, email, password_hash) VALUES ($1, $2, 'x')`, ids[i], ids[i]+"@example.com")
		if err != nil {
			b.Fatal(err)
		}
	}
	return ids
}

// fillStream places n orders of sku, spread over users, from 32 goroutines.
func fillStream(b *testing.B, svc *Service, users []string, sku string, n int) {
	b.Helper()
	const workers = 32
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				_, err := svc.Place(context.Background(), users[i%len(users)], []Line{{SKU: sku, Quantity: 1}}, PlaceOptions{})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}
