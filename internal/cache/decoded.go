package cache

import (
	lru "github.com/hashicorp/golang-lru/v2"
)

// The decoded memo: GetJSONShared and GetJSONPrefetched remember, for the
// most recently read keys, the value they last decoded and the bytes it
// was decoded from. A read that gets exactly those bytes again from Redis
// (every hit between two writes of the key) hands out that value instead
// of decoding the JSON again. The bytes are compared in full, so no
// answer changes and nothing is served that Redis did not just return:
// the memo saves the decoding only, never a round trip (that is the near
// cache's job, with its bounded staleness). Decoding a product document
// was a tenth of a product read's CPU (issue 16, BENCHMARKS.md).
//
// Like the near cache's decoded values, a remembered value is handed to
// every reader that gets the same bytes, which is why only the Shared
// reads use it: their T is one callers only read.

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
