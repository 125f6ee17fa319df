package live

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sharded subscriptions, on a Redis Cluster (inventory's ShardedChanges): the
// changes are SPUBLISHed on each SKU's channel, delivered by the master of
// its slot only, and a sharded channel has no pattern form.
// More in docs/design/live.md ("sharded.go").

// shards is the sharded subscriptions of one Run; only Run's goroutine
// uses it.
type shards struct {
	h     *Hub
	parts map[int]*shard // by partition, only while it has channels
	// resync takes the SKUs whose subscriptions were confirmed, for one
	// worker to read again in turn.
	resync *skuQueue
	// events takes the subscription replies of the receive loops, and the
	// confirmation checks, to Run's goroutine.
	events chan shardEvent
}

// shard is the subscription connection of one partition.
type shard struct {
	part     int
	ps       *redis.PubSub
	channels map[string]bool
	// leaving counts the SUNSUBSCRIBEs sent per channel and not yet
	// answered: an answer beyond them is the server's own.
	leaving map[string]int
	// waiting is the channels whose SSUBSCRIBE is not yet confirmed.
	waiting map[string]bool
	opened  int // how many times the partition was opened in a row unconfirmed
	// addr is the master the slot map named when the connection opened;
	// moved counts the checks since that master ended the subscriptions
	// (0: it did not).
	addr  string
	moved int
	// left is addr when the connection was opened again on the master that
	// ended its subscriptions (the map named no other yet): its
	// confirmation is checked again, rechecks times so far, until the node
	// is a master or the map names another one. "" when addr is trusted.
	left     string
	rechecks int
	check    *time.Timer // the next check
	// gen numbers the checks scheduled: a check that fired before a later
	// one was scheduled is stale, and ignored.
	gen     int
	closing chan struct{} // closed by close, so that no loop waits on Run
	done    chan struct{} // closed when its receive loop ends
}

// shardEvent is one reply of a shard's connection (kind ssubscribe or
// sunsubscribe), or its check number gen (kind "").
type shardEvent struct {
	sh      *shard
	kind    string
	channel string
	gen     int
}

// confirmWait is how long a connection's first SSUBSCRIBE may go
// unconfirmed before it is opened again; each retry doubles it, up to
// confirmWaitMax. After its master ended the subscriptions, the slot map
// is read again every movedWait until it names another master, at most
// movedTries times (the slot may have come back). A node's ROLE must
// answer within roleWait.
const (
	confirmWait    = time.Second
	confirmWaitMax = 16 * time.Second
	movedWait      = 100 * time.Millisecond
	movedTries     = 50
	roleWait       = time.Second
)

// runSharded holds the per-SKU subscriptions until ctx ends, following
// the watched SKUs (poked by subscribe and unsubscribe).
func (h *Hub) runSharded(ctx context.Context) {
	s := &shards{h: h, parts: map[int]*shard{}, resync: newSKUQueue(), events: make(chan shardEvent)}
	worker := make(chan struct{})
	go func() { defer close(worker); s.resyncLoop(ctx) }()
	defer func() { <-worker }()
	defer s.closeAll()
	for {
		s.reconcile(ctx)
	events:
		for {
			select {
			case <-ctx.Done():
				return
			case <-h.watched:
				break events
			case e := <-s.events:
				s.handle(ctx, e)
			}
		}
	}
}

// handle takes one event of a shard, if it is still the partition's
// connection.
func (s *shards) handle(ctx context.Context, e shardEvent) {
	sh := e.sh
	if s.parts[sh.part] != sh {
		return // closed since; its replies no longer matter
	}
	switch e.kind {
	case "ssubscribe":
		delete(sh.waiting, e.channel)
		if len(sh.waiting) == 0 {
			sh.opened = 0
			if sh.left != "" && sh.moved == 0 {
				s.schedule(sh, sh.recheckWait())
			}
		}
		if sku, ok := s.h.stock.ChangesSKU(e.channel); ok {
			s.resync.add(sku)
		}
	case "sunsubscribe":
		switch {
		case sh.leaving[e.channel] > 0:
			if sh.leaving[e.channel]--; sh.leaving[e.channel] == 0 {
				delete(sh.leaving, e.channel)
			}
		case sh.channels[e.channel] && sh.moved == 0:
			s.h.log.Info("live stock: sharded channel unsubscribed by its server (its slot moved); subscribing again on its new master",
				"partition", sh.part, "channel", e.channel)
			sh.moved = 1
			s.reload()
			s.schedule(sh, movedWait)
		}
	default:
		if e.gen == sh.gen {
			s.checked(ctx, sh)
		}
	}
}

// checked is a shard's check: after its server ended its subscriptions,
// whether the slot map names another master yet; else whether every
// channel was confirmed; then, if it was opened again on the master it
// was told to leave, whether that node serves the slot.
func (s *shards) checked(ctx context.Context, sh *shard) {
	switch {
	case sh.moved > 0:
		if s.masterOf(ctx, sh.channel()) == sh.addr && sh.moved < movedTries {
			sh.moved++
			s.reload()
			s.schedule(sh, movedWait)
			return
		}
		s.reopen(ctx, sh, 0)
	case len(sh.waiting) > 0:
		s.h.log.Warn("live stock: sharded subscription not confirmed; subscribing again",
			"partition", sh.part, "unconfirmed", len(sh.waiting))
		s.reload()
		s.reopen(ctx, sh, sh.opened+1)
	case sh.left != "":
		s.recheck(ctx, sh)
	}
}

// recheck is the check of a confirmation from the master sh was told to
// leave: the connection follows the slot map once it names another
// master, and stays for good on a node that is a master again.
func (s *shards) recheck(ctx context.Context, sh *shard) {
	switch m := s.masterOf(ctx, sh.channel()); {
	case m != "" && m != sh.left:
		s.h.log.Info("live stock: sharded slot's master known at last; subscribing again there",
			"partition", sh.part, "master", m)
		s.reopen(ctx, sh, 0)
	case m == sh.left && s.isMaster(ctx, sh.channel()):
		sh.left, sh.rechecks = "", 0 // the slot came back
	default:
		sh.rechecks++
		s.reload()
		s.schedule(sh, sh.recheckWait())
	}
}

// isMaster is whether the node the slot map names for channel's slot
// says it is a master (ROLE); false if it does not answer.
func (s *shards) isMaster(ctx context.Context, channel string) bool {
	c, ok := s.h.rdb.(interface {
		MasterForKey(context.Context, string) (*redis.Client, error)
	})
	if !ok {
		return false
	}
	m, err := c.MasterForKey(ctx, channel)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, roleWait)
	defer cancel()
	role, err := m.Do(ctx, "ROLE").Slice()
	return err == nil && len(role) > 0 && role[0] == "master"
}

// recheckWait is how long a confirmation from the master the shard was
// told to leave stands before it is checked again.
func (sh *shard) recheckWait() time.Duration {
	return min(confirmWait<<min(sh.rechecks, 8), confirmWaitMax)
}

// schedule sets sh's next check, in place of any earlier one: one that
// fired already and waits for Run's goroutine is then ignored.
func (s *shards) schedule(sh *shard, d time.Duration) {
	if sh.check != nil {
		sh.check.Stop()
	}
	sh.gen++
	gen := sh.gen
	sh.check = time.AfterFunc(d, func() { s.send(shardEvent{sh: sh, gen: gen}) })
}

// reload tells the cluster client to read the slot map again (it does so
// in the background).
func (s *shards) reload() {
	if c, ok := s.h.rdb.(interface{ ReloadState(context.Context) }); ok {
		c.ReloadState(context.Background())
	}
}

// masterOf is the address of the master the cluster client's slot map
// names for channel's slot, "" if unknown.
func (s *shards) masterOf(ctx context.Context, channel string) string {
	c, ok := s.h.rdb.(interface {
		MasterForKey(context.Context, string) (*redis.Client, error)
	})
	if !ok {
		return ""
	}
	m, err := c.MasterForKey(ctx, channel)
	if err != nil {
		return ""
	}
	return m.Options().Addr
}

// channel is one of sh's channels: they share one slot.
func (sh *shard) channel() string {
	for ch := range sh.channels {
		return ch
	}
	return ""
}

// reopen closes a partition's connection and opens it again with all its
// channels; opened is the open's count of unconfirmed ones before it. A
// connection that lands again on the master it was told to leave (sh's
// own, if that one ended its subscriptions) keeps that in mind.
func (s *shards) reopen(ctx context.Context, sh *shard, opened int) {
	sh.close()
	channels := make([]string, 0, len(sh.channels))
	for ch := range sh.channels {
		channels = append(channels, ch)
	}
	n := s.open(ctx, sh.part, channels, opened)
	for _, ch := range channels {
		n.channels[ch] = true
	}
	left := sh.left
	if sh.moved > 0 {
		left = sh.addr
	}
	if left != "" && n.addr == left {
		n.left, n.rechecks = left, sh.rechecks
	}
	s.parts[sh.part] = n
}

// poke tells the sharded subscriptions that the watched SKUs changed; it
// never blocks (one pending poke covers any number of changes).
func (h *Hub) poke() {
	select {
	case h.watched <- struct{}{}:
	default:
	}
}

// reconcile subscribes to the channels of the watched SKUs and
// unsubscribes from the others.
func (s *shards) reconcile(ctx context.Context) {
	want := s.wanted()
	s.unsubscribe(ctx, want)
	s.subscribe(ctx, want)
}

// unsubscribe drops the channels not in want, and the connections of the
// partitions left with none.
func (s *shards) unsubscribe(ctx context.Context, want map[int]map[string]bool) {
	for k, sh := range s.parts {
		var gone []string
		for ch := range sh.channels {
			if !want[k][ch] {
				gone = append(gone, ch)
			}
		}
		switch {
		case len(gone) == len(sh.channels):
			sh.close()
			delete(s.parts, k)
		case len(gone) > 0:
			if err := sh.ps.SUnsubscribe(ctx, gone...); err != nil {
				s.h.log.Warn("live stock: sharded unsubscribe failed", "partition", k, "err", err)
			}
			for _, ch := range gone {
				delete(sh.channels, ch)
				delete(sh.waiting, ch)
				sh.leaving[ch]++
			}
		}
	}
}

// subscribe adds the channels of want not yet subscribed, opening a
// partition's connection with its first ones.
func (s *shards) subscribe(ctx context.Context, want map[int]map[string]bool) {
	for k, chans := range want {
		sh := s.parts[k]
		var add []string
		for ch := range chans {
			if sh == nil || !sh.channels[ch] {
				add = append(add, ch)
			}
		}
		switch {
		case len(add) == 0:
			continue
		case sh == nil:
			sh = s.open(ctx, k, add, 0)
			s.parts[k] = sh
		default:
			// On failure the channels stay in the PubSub's set: its
			// reconnect subscribes them again.
			if err := sh.ps.SSubscribe(ctx, add...); err != nil {
				s.h.log.Warn("live stock: sharded subscribe failed", "partition", k, "err", err)
			}
			for _, ch := range add {
				sh.waiting[ch] = true
			}
			s.schedule(sh, sh.confirmWait())
		}
		for _, ch := range add {
			sh.channels[ch] = true
		}
	}
}

// wanted is the channels of the watched SKUs, by partition.
func (s *shards) wanted() map[int]map[string]bool {
	want := map[int]map[string]bool{}
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	for sku := range s.h.topics {
		for _, w := range s.h.stock.WatchChannels(sku) { // a bucketed round's buckets' too
			if want[w.Partition] == nil {
				want[w.Partition] = map[string]bool{}
			}
			want[w.Partition][w.Channel] = true
		}
	}
	return want
}

// open starts partition k's subscription connection with its first
// channels: they route it to the partition slot's master. opened is how
// many times it was opened before in a row without every channel
// confirmed; the confirmation check waits longer for each.
func (s *shards) open(ctx context.Context, k int, channels []string, opened int) *shard {
	addr := s.masterOf(ctx, channels[0])
	sh := &shard{
		part: k, ps: s.h.rdb.SSubscribe(ctx, channels...), channels: map[string]bool{}, addr: addr,
		leaving: map[string]int{}, waiting: map[string]bool{}, opened: opened,
		closing: make(chan struct{}), done: make(chan struct{}),
	}
	for _, ch := range channels {
		sh.waiting[ch] = true
	}
	s.schedule(sh, sh.confirmWait())
	ch := sh.ps.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	go func() {
		defer close(sh.done)
		for m := range ch {
			switch m := m.(type) {
			case *redis.Message:
				s.h.receive(m)
			case *redis.Subscription:
				if m.Kind == "ssubscribe" || m.Kind == "sunsubscribe" {
					s.send(shardEvent{sh: sh, kind: m.Kind, channel: m.Channel})
				}
			}
		}
	}()
	return sh
}

// confirmWait is how long the shard's SSUBSCRIBEs may go unconfirmed.
func (sh *shard) confirmWait() time.Duration {
	return min(confirmWait<<min(sh.opened, 8), confirmWaitMax)
}

// send hands e to Run's goroutine, unless e's shard is closed meanwhile
// (Run may be waiting for its receive loop to end).
func (s *shards) send(e shardEvent) {
	select {
	case s.events <- e:
	case <-e.sh.closing:
	}
}

// close ends the partition's connection and waits for its receive loop.
func (sh *shard) close() {
	sh.check.Stop()
	close(sh.closing)
	_ = sh.ps.Close()
	<-sh.done
}

func (s *shards) closeAll() {
	for k, sh := range s.parts {
		sh.close()
		delete(s.parts, k)
	}
}

// resyncLoop reads again, one at a time, the SKUs whose subscriptions were
// confirmed, until ctx ends.
func (s *shards) resyncLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.resync.ready:
		}
		s.h.resyncSKUs(ctx, s.resync.take())
	}
}

// skuQueue is a set of SKUs to read again, and a signal that it is not
// empty.
type skuQueue struct {
	mu    sync.Mutex
	skus  map[string]bool
	ready chan struct{}
}

func newSKUQueue() *skuQueue {
	return &skuQueue{skus: map[string]bool{}, ready: make(chan struct{}, 1)}
}

func (q *skuQueue) add(sku string) {
	q.mu.Lock()
	q.skus[sku] = true
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *skuQueue) take() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]string, 0, len(q.skus))
	for sku := range q.skus {
		out = append(out, sku)
	}
	clear(q.skus)
	return out
}
