package auth

import (
	"context"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shop-oss/shop/internal/testenv"
)

// BenchmarkVerifyToken measures what every authenticated request pays: the
// bearer JWT's signature and claims check, then the session check script's
// round trip to Redis. Results: BENCHMARKS.md.
func BenchmarkVerifyToken(b *testing.B) {
	r := testenv.NewRedis(b)
	db := testenv.NewDatabase(b)
	cfg := Config{Secret: testSecret, AccessTTL: testAccessTTL, SessionTTL: testSessionTTL, KeyPrefix: r.Prefix}
	svc := New(db.Pool, r.Client, cfg, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	ctx := context.Background()
	if _, err := svc.CreateUser(ctx, "bench@example.com", testPassword, "", RoleShopper); err != nil {
		b.Fatal(err)
	}
	tok, err := svc.Login(ctx, "bench@example.com", testPassword, "bench")
	if err != nil {
		b.Fatal(err)
	}
	header := "Bearer " + tok.AccessToken
	b.ReportAllocs()
	b.SetParallelism(25) // 50 callers on 2 cores, like redis-benchmark -c 50
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			claims, err := svc.tokens.parseBearer(header)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := svc.authenticate(ctx, claims, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
