package inventory

import (
	"bytes"
	"encoding/json"
	"strconv"

	lru "github.com/hashicorp/golang-lru/v2"
)

// productJSON encodes the product read's answer (GET
// /api/v1/products/{sku}) as json.Marshal does, byte for byte, without
// encoding the same product again on every read: it keeps, for the most
// recently read products, the JSON before and after the live `available`
// and writes the number between them. A product that changed in any
// field is encoded afresh (the fields are compared in full), so no answer
// changes; only json.Marshal's reflection and the time's formatting are
// saved, a twentieth of a product read's CPU (issue 16, BENCHMARKS.md).
type productJSON struct {
	lru *lru.Cache[string, productParts] // safe for concurrent use
}

// productJSONSize bounds the products kept, like the cache's decoded
// memo: a sale reads a few products over and over.
const productJSONSize = 1024

// productParts is a product's JSON around its available units.
type productParts struct {
	p          Product // with Available 0
	head, tail []byte
}

// availableField is where Available (0) sits in json.Marshal's encoding
// of a Product: after price_cents and before updated_at, in the struct's
// order. Its quotes cannot occur unescaped inside a string field, so it
// occurs once.
var availableField = []byte(`,"available":0,"updated_at":`)

func newProductJSON() *productJSON {
	c, err := lru.New[string, productParts](productJSONSize)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return &productJSON{lru: c}
}

// encode is json.Marshal(p).
func (e *productJSON) encode(p Product) ([]byte, error) {
	parts, ok := e.parts(p)
	if !ok {
		return json.Marshal(p)
	}
	out := make([]byte, 0, len(parts.head)+20+len(parts.tail))
	out = append(out, parts.head...)
	out = strconv.AppendInt(out, p.Available, 10)
	return append(out, parts.tail...), nil
}

// parts are p's JSON around Available, from the memo or encoded now; ok
// is false when they cannot be had (p does not encode, or encodes
// without the field where it is expected).
func (e *productJSON) parts(p Product) (productParts, bool) {
	key := p
	key.Available = 0
	parts, ok := e.lru.Get(p.SKU)
	if ok && parts.p == key {
		return parts, true
	}
	b, err := json.Marshal(key)
	if err != nil {
		return productParts{}, false
	}
	i := bytes.Index(b, availableField)
	if i < 0 {
		return productParts{}, false
	}
	at := i + len(`,"available":`)
	parts = productParts{p: key, head: b[:at], tail: b[at+1:]}
	e.lru.Add(p.SKU, parts)
	return parts, true
}
