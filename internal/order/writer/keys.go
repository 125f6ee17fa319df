package writer

import (
	"github.com/shop-oss/shop/internal/order"
)

const group = order.StreamGroup
