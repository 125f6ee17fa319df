package audit

import (
	"context"
	"fmt"
	"strconv"
)

// Stock buckets (docs/design/buckets.md): on a single Redis one snapshot
// reads every bucket of a round and sumBuckets folds them into one; on a
// cluster each bucket is read in its own partition's snapshot, with the
// lines held there, and compareRounds merges them (mergeBuckets).

// bucketCounts is one stock bucket's own counters (its sale hash's).
type bucketCounts struct {
	seeded, movedIn, movedOut, released, available int64
}

func countsOf(sale map[string]string) bucketCounts {
	return bucketCounts{seeded: num(sale["seeded"]), movedIn: num(sale["moved_in"]), movedOut: num(sale["moved_out"]),
		released: num(sale["released"]), available: num(sale["available"])}
}

// moving is the units of buckets' moves under way: taken out of their
// source (moved_out) and not yet added to their target (moved_in). Each
// step of a move keeps available + moved_out − moved_in of every bucket,
// so the round's equation holds with it whenever its buckets were read.
func moving(buckets []bucketCounts) int64 {
	var n int64
	for _, c := range buckets {
		n += c.movedOut - c.movedIn
	}
	return n
}

// saleRef is what one SKU's entry in a snapshot reads: bucket 0 to
// buckets−1 of its round on a single Redis (one read each, in one script),
// or on a cluster (one) the one bucket whose partition the snapshot is.
type saleRef struct {
	sku             string
	bucket, buckets int
	one             bool
}

func (r saleRef) reads() int {
	if r.one {
		return 1
	}
	return r.buckets
}

// saleRefs are the sale hashes each partition's snapshot reads, by the
// partition whose snapshot reads them: on a cluster each bucket of a
// round in its own (Stock.BucketPartition), since a script reads one
// slot; on a single Redis a SKU's every bucket where the SKU is.
func (a *Auditor) saleRefs(ctx context.Context, skus []string) (map[int][]saleRef, error) {
	out := map[int][]saleRef{}
	for _, sku := range skus {
		n, err := a.stock.LearnBuckets(ctx, sku)
		if err != nil {
			return nil, err
		}
		if !a.parts.Grouped() || n == 1 {
			out[a.parts.Of(sku)] = append(out[a.parts.Of(sku)], saleRef{sku: sku, buckets: n})
			continue
		}
		for b := range n {
			p := a.stock.BucketPartition(sku, b, n)
			out[p] = append(out[p], saleRef{sku: sku, bucket: b, buckets: n, one: true})
		}
	}
	return out, nil
}

// sumBuckets folds the sale hashes and buyer counts read for each ref
// (bucket 0 first) into one, as a round of one bucket reads: the round's
// fields from bucket 0, the buckets' available and released summed, their
// buyer counts joined (a shopper is counted in their home bucket only). A
// bucket of another round, or of a round of another number of buckets,
// means the SKU is being reseeded: the snapshot is refused, to be taken
// again. perBucket holds each ref's buckets' own counters (nil for a
// round of one), for their equations (bucketProblems).
func sumBuckets(raw list[[2]any], refs []saleRef) (out list[[2]any], perBucket [][]bucketCounts, err error) {
	out, perBucket = make(list[[2]any], 0, len(refs)), make([][]bucketCounts, len(refs))
	i := 0
	for k, ref := range refs {
		n := ref.reads()
		if i+n > len(raw) {
			return nil, nil, fmt.Errorf("%d sale hashes read, want more", len(raw))
		}
		sale := pairs(raw[i][0])
		// The buckets were counted before the snapshot: a reseeding with
		// another number in between would leave some unread.
		if sale["round"] != "" && int(max(num(sale["buckets"]), 1)) != ref.buckets {
			return nil, nil, fmt.Errorf("%s: read as %d buckets, its round has %s (being reseeded)", ref.sku, ref.buckets, sale["buckets"])
		}
		if ref.buckets > 1 {
			perBucket[k] = []bucketCounts{countsOf(sale)}
		}
		if n == 1 {
			out, i = append(out, raw[i]), i+1
			continue
		}
		buyers := pairs(raw[i][1])
		avail, given := num(sale["available"]), num(sale["released"])
		for _, r := range raw[i+1 : i+n] {
			bs := pairs(r[0])
			perBucket[k] = append(perBucket[k], countsOf(bs))
			if bs["round"] != sale["round"] {
				return nil, nil, fmt.Errorf("%s: its buckets hold rounds %s and %s (being reseeded)", ref.sku, sale["round"], bs["round"])
			}
			avail, given = avail+num(bs["available"]), given+num(bs["released"])
			for u, c := range pairs(r[1]) {
				buyers[u] = strconv.FormatInt(num(buyers[u])+num(c), 10)
			}
		}
		sale["available"], sale["released"] = strconv.FormatInt(avail, 10), strconv.FormatInt(given, 10)
		out, i = append(out, [2]any{flatten(sale), flatten(buyers)}), i+n
	}
	if i != len(raw) {
		return nil, nil, fmt.Errorf("%d sale hashes read, want %d", len(raw), i)
	}
	return out, perBucket, nil
}

// oneRoundEach checks that the buckets a cluster's snapshots read of each
// SKU are one round, whole: their partitions' snapshots are taken one
// after another, and a reseeding in between leaves them mixed (the audit
// is taken again).
func oneRoundEach(lives []live) error {
	seen := map[string][]live{}
	for _, l := range lives {
		if l.of > 1 {
			seen[l.sku] = append(seen[l.sku], l)
		}
	}
	for sku, ls := range seen {
		for _, l := range ls {
			if l.round != ls[0].round || l.of != ls[0].of {
				return fmt.Errorf("%s: its buckets hold rounds %d and %d (being reseeded)", sku, ls[0].round, l.round)
			}
		}
		if len(ls) != ls[0].of {
			return fmt.Errorf("%s: %d of its %d buckets hold round %d (being reseeded)", sku, len(ls), ls[0].of, ls[0].round)
		}
	}
	return nil
}

// mergeBuckets folds, on a cluster, each round's buckets (lives of one
// bucket each, with the orders each holds) into one live with the orders
// of all: available, released and buyer counts summed, each bucket's
// counters in its place. Other lives pass as they are.
func mergeBuckets(lives []live, byLive []map[string]*held) ([]live, []map[string]*held) {
	var out []live
	var outHeld []map[string]*held
	at := map[int64]int{} // a merged round's index in out
	for i, l := range lives {
		if l.of <= 1 {
			out, outHeld = append(out, l), append(outHeld, byLive[i])
			continue
		}
		j, ok := at[l.round]
		if !ok {
			j, at[l.round] = len(out), len(out)
			m := l
			m.avail, m.given, m.buyers, m.buckets = 0, 0, map[string]int64{}, make([]bucketCounts, l.of)
			out, outHeld = append(out, m), append(outHeld, map[string]*held{})
		}
		m := &out[j]
		if l.bucket == 0 {
			m.partition = l.partition // the SKU's, where its problems are named
		}
		m.avail, m.given, m.buckets[l.bucket] = m.avail+l.avail, m.given+l.given, l.buckets[0]
		for u, n := range l.buyers {
			m.buyers[u] += n
		}
		for id, h := range byLive[i] {
			outHeld[j][id] = h
		}
	}
	return out, outHeld
}
