package recoverytest

import (
	"fmt"

	"github.com/redis/go-redis/v9"
)

// redisXAdd is a dead letter of a one-unit order event of "b", as the
// writer writes one.
type redisXAdd struct {
	stream, orderID, userID string
	round                   int64
}

func (d redisXAdd) args() *redis.XAddArgs {
	return &redis.XAddArgs{Stream: d.stream, Values: []string{
		"source_id", "1-1", "reason", "test", "deliveries", "5",
		"event_order_id", d.orderID, "event_user_id", d.userID, "event_created_ms", "1",
		"event_total_cents", "100", "event_expires_ms", "0",
		"event_items", fmt.Sprintf(`[{"sku":"b","quantity":1,"price_cents":100,"round_id":%d,"released":0}]`, d.round),
	}}
}
