package order_test

import (
	"github.com/shop-oss/shop/internal/order"
	"github.com/shop-oss/shop/internal/order/saga"
)

func init() {
	order.NewSagaPlacer = func() func(order.Kit) order.Placer { return saga.New(saga.Options{}).On }
}
