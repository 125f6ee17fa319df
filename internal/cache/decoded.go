package cache

import (
	lru "github.com/hashicorp/golang-lru/v2"
)

// The decoded memo: GetJSONShared and GetJSONPrefetched remember, for the
// most recently read keys, the value they last decoded and the bytes it was
// decoded from.
// More in docs/design/cache.md ("decoded.go").

// decodedMemoSize bounds the memo: a flash sale reads a few products
// over and over, and a miss costs one decoding, what every read cost
// before.
const decodedMemoSize = 1024

type decodedMemo struct {
	lru *lru.Cache[string, decodedValue] // safe for concurrent use
}

type decodedValue struct {
	from string // the JSON v was decoded from
	v    any
}

func newDecodedMemo(size int) *decodedMemo {
	c, err := lru.New[string, decodedValue](size)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return &decodedMemo{lru: c}
}

// get returns the value decoded from b for key, if the last one
// remembered for key was decoded from exactly b.
func (m *decodedMemo) get(key string, b []byte) (any, bool) {
	d, ok := m.lru.Get(key)
	if !ok || d.from != string(b) {
		return nil, false
	}
	return d.v, true
}

// put remembers v, decoded from b, for key.
func (m *decodedMemo) put(key string, b []byte, v any) {
	m.lru.Add(key, decodedValue{from: string(b), v: v})
}
