package inventory

import (
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// StockView is one instance's picture of the available stock of the SKUs its
// product reads asked for lately, so that a read needs no Redis round trip
// for it.
// More in docs/design/inventory.md ("view.go").
type StockView struct {
	ttl time.Duration

	mu    sync.Mutex
	lru   *simplelru.LRU[string, *viewEntry]
	epoch uint64 // bumped when the picture is dropped
	ready bool   // subscribed: changes are heard
}

type viewEntry struct {
	available int64
	known     bool      // available holds a state (else a read is filling it)
	at        time.Time // when that state was confirmed
	heard     uint64    // messages applied: a fill started before one stores nothing
}

// NewStockView returns a view whose entries are trusted for ttl, of at
// most size SKUs; nil (off) when ttl is 0.
func NewStockView(ttl time.Duration, size int) *StockView {
	if ttl <= 0 {
		return nil
	}
	lru, err := simplelru.NewLRU[string, *viewEntry](max(size, 1), nil)
	if err != nil {
		panic(err) // only for a size <= 0, excluded above
	}
	return &StockView{ttl: ttl, lru: lru}
}

// Subscribed tells the view that changes are heard from now on; what it
// knew is dropped, since changes made before may have been missed.
func (v *StockView) Subscribed() { v.reset(true) }

// Unsubscribed tells the view that changes are no longer heard.
func (v *StockView) Unsubscribed() { v.reset(false) }

func (v *StockView) reset(ready bool) {
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.epoch++
	v.lru.Purge()
	v.ready = ready
}

// Heard applies a published change to the SKU's entry, if it has one.
func (v *StockView) Heard(c Change) {
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.lru.Peek(c.SKU)
	if !ok || !v.ready {
		return
	}
	e.available, e.known, e.at = c.Available, true, time.Now()
	switch {
	case c.Round == 0:
		e.available = 0
	case c.Buckets > 1:
		e.known = false // one bucket's units: the next read sums the round
	}
	e.heard++
}

// viewFill is a read from Redis in progress for one SKU.
type viewFill struct {
	entry   *viewEntry
	epoch   uint64
	heard   uint64
	started time.Time
}

// lookup returns the available stock of sku if the view trusts its entry;
// otherwise, when the view is subscribed, it returns the fill the caller's
// Redis read completes (nil: store nothing).
func (v *StockView) lookup(sku string, now time.Time) (available int64, ok bool, f *viewFill) {
	if v == nil {
		return 0, false, nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	e, found := v.lru.Get(sku)
	if found && e.known && now.Sub(e.at) < v.ttl {
		return e.available, true, nil
	}
	if !v.ready {
		return 0, false, nil
	}
	if !found {
		// A placeholder, so that messages heard during the read count.
		e = &viewEntry{}
		v.lru.Add(sku, e)
	}
	return 0, false, &viewFill{entry: e, epoch: v.epoch, heard: e.heard, started: now}
}

// fill stores what a read from Redis found, unless a message or a reset
// came in between: the message's state is as new or newer.
func (v *StockView) fill(f *viewFill, available int64) {
	if f == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.epoch != f.epoch || f.entry.heard != f.heard {
		return
	}
	e := f.entry
	e.available, e.known, e.at = available, true, f.started
}

// Listening reports whether the view is on and hears the stock changes:
// only then does it keep anything.
func (v *StockView) Listening() bool {
	if v == nil {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.ready
}
