package catalogtest

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shop-oss/shop/internal/inventory"
	"github.com/shop-oss/shop/internal/racetest"
)

// seedFault is what a seedFaults hook does to one call of the seed script.
type seedFault int

const (
	seedPasses    seedFault = iota
	seedNotSent             // the call fails before it reaches Redis
	seedReplyLost           // the script runs in Redis; its reply is lost
)

// seedFaults is a Redis hook applying fault() to every seed script call,
// with the error of a connection dropped mid-reply (a store outage).
type seedFaults struct {
	script string
	fault  func() seedFault
}

func newSeedFaults(t *testing.T, fault func() seedFault) seedFaults {
	t.Helper()
	src, err := os.ReadFile("../../inventory/seed.lua") // the script whose calls it spots
	if err != nil {
		t.Fatal(err)
	}
	return seedFaults{script: string(src), fault: fault}
}

func (seedFaults) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h seedFaults) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	sum := sha1.Sum([]byte(h.script))
	sha := hex.EncodeToString(sum[:])
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) < 2 || (args[1] != sha && args[1] != h.script) {
			return next(ctx, cmd)
		}
		switch h.fault() {
		case seedNotSent:
			cmd.SetErr(io.ErrUnexpectedEOF)
			return io.ErrUnexpectedEOF
		case seedReplyLost:
			if err := next(ctx, cmd); err != nil {
				return err
			}
			cmd.SetErr(io.ErrUnexpectedEOF)
			return io.ErrUnexpectedEOF
		}
		return next(ctx, cmd)
	}
}

func (seedFaults) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// putUntilOK repeats a stock PUT answered 503 until it is answered 200.
func (in *instance) putUntilOK(t *testing.T, sku, body string) inventory.StockReport {
	t.Helper()
	for deadline := time.Now().Add(3 * stockBound); ; {
		r := in.do(t, http.MethodPut, "/api/v1/admin/products/"+sku+"/stock", body)
		if r.status == http.StatusOK {
			return r.stockReport(t)
		}
		r.problem(t, http.StatusServiceUnavailable, "unavailable")
		if time.Now().After(deadline) {
			t.Fatal("the retries never converged")
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// liveRound is the round Redis has live for sku (0: none).
func (in *instance) liveRound(t *testing.T, rdb redis.UniversalClient, sku string) int64 {
	t.Helper()
	n, err := rdb.HGet(context.Background(), in.Config.KeyPrefix+"sale:{"+sku+"}", "round").Int64()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	return n
}

// A stock PUT whose Redis step fails after its round was recorded answers
// 503, and its retries converge on one round, recorded live and live in
// Redis: whether the seed never reached Redis or ran there and its answer
// was lost, retried with the same body or another.
func TestSeedRetryAfterAFailedOpenConverges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault seedFault
		retry string
		want  []string // the rounds after the first, as "quantity:opened"

	}{
		{"not_sent_same_body", seedNotSent, `{"quantity":99}`, []string{"99:true"}},
		{"not_sent_other_body", seedNotSent, `{"quantity":50}`, []string{"50:true"}},
		{"reply_lost_same_body", seedReplyLost, `{"quantity":99}`, []string{"99:true"}},
		{"reply_lost_other_body", seedReplyLost, `{"quantity":50}`, []string{"99:true", "50:true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var failing atomic.Bool
			st := newStores(t)
			st = st.withClient(t, newSeedFaults(t, func() seedFault {
				if failing.CompareAndSwap(true, false) {
					return tc.fault
				}
				return seedPasses
			}))
			in := newInstance(t, st)
			sku := "conv-" + tc.name
			in.create(t, sku, "c", 100)
			first := *in.seed(t, sku, `{"quantity":10}`).RoundID

			failing.Store(true)
			in.do(t, http.MethodPut, "/api/v1/admin/products/"+sku+"/stock", `{"quantity":99}`).
				problem(t, http.StatusServiceUnavailable, "unavailable")
			rep := in.putUntilOK(t, sku, tc.retry)

			want := []string{fmt.Sprintf("%d:10:true", first)}
			for i, w := range tc.want {
				want = append(want, fmt.Sprintf("%d:%s", first+int64(i)+1, w))
			}
			if got := roundRows(t, st.db, sku); !slices.Equal(got, want) {
				t.Fatalf("rounds after the retry: %v, want %v", got, want)
			}
			last := first + int64(len(tc.want))
			if *rep.RoundID != last || rep.Available != rep.Quantity {
				t.Fatalf("the retry answered %+v, want round %d, all available", rep, last)
			}
			if live := in.liveRound(t, st.rdb, sku); live != last {
				t.Fatalf("Redis's live round is %d, PostgreSQL's %d", live, last)
			}
		})
	}
}

// A round whose opened mark is missing but that sold (it went live, and
// its sale state is gone from Redis since, as after the week an ended
// round's state is kept) is not taken over: its orders stay its own, it is
// marked opened, and the next seeding records a new round.
func TestSeedDoesNotTakeOverARoundThatSold(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	in := newInstance(t, st)
	in.create(t, "sold-1", "c", 100)
	first := *in.seed(t, "sold-1", `{"quantity":10}`).RoundID
	st.exec(t, `UPDATE sale_rounds SET opened_at = NULL, sold = 2 WHERE id = $1`, first)
	if err := st.rdb.Del(context.Background(), in.Config.KeyPrefix+"sale:{sold-1}").Err(); err != nil {
		t.Fatal(err)
	}
	rep := in.seed(t, "sold-1", `{"quantity":7}`)
	want := []string{fmt.Sprintf("%d:10:true", first), fmt.Sprintf("%d:7:true", first+1)}
	if got := roundRows(t, st.db, "sold-1"); !slices.Equal(got, want) || *rep.RoundID != first+1 {
		t.Fatalf("rounds %v, report %+v; want %v", got, rep, want)
	}
}

// A SKU whose only round never went live has no round to report: the
// stock report is all zero, not a sold-out round.
func TestStockReportLeavesOutARoundThatNeverWentLive(t *testing.T) {
	t.Parallel()
	st := newStores(t)
	st = st.withClient(t, newSeedFaults(t, func() seedFault { return seedNotSent }))
	in := newInstance(t, st)
	in.create(t, "never-1", "c", 100)
	in.do(t, http.MethodPut, "/api/v1/admin/products/never-1/stock", `{"quantity":99}`).
		problem(t, http.StatusServiceUnavailable, "unavailable")
	if got := roundRows(t, st.db, "never-1"); len(got) != 1 {
		t.Fatalf("rounds %v, want the one not opened", got)
	}
	rep := in.do(t, http.MethodGet, "/api/v1/admin/products/never-1/stock", "").stockReport(t)
	if rep.RoundID != nil || rep.Quantity != 0 || rep.Sold != 0 {
		t.Fatalf("stock report %+v, want no round", rep)
	}
}

// Concurrent stock PUTs of one SKU while Redis fails some of their seeds
// (before they reach it, or losing the answer): once one more PUT is
// answered, PostgreSQL and Redis agree on the live round, every recorded
// round went live, and no more rounds were recorded than answers and
// failures after Redis could produce.
func TestConcurrentSeedsWhileRedisFailsAgree(t *testing.T) {
	t.Parallel()
	const n = 12
	var calls, lost atomic.Int64
	st := newStores(t)
	st = st.withClient(t, newSeedFaults(t, func() seedFault {
		switch calls.Add(1) % 3 {
		case 0:
			return seedNotSent
		case 1:
			lost.Add(1)
			return seedReplyLost
		}
		return seedPasses
	}))
	in := newInstance(t, st)
	in.create(t, "race-1", "c", 100)
	in.putUntilOK(t, "race-1", `{"quantity":1}`)

	var ok atomic.Int64
	racetest.Together(racetest.Times(n, func(i int) {
		body := fmt.Sprintf(`{"quantity":%d}`, 10+i%4)
		r := in.do(t, http.MethodPut, "/api/v1/admin/products/race-1/stock", body)
		switch r.status {
		case http.StatusOK:
			ok.Add(1)
		case http.StatusServiceUnavailable:
		default:
			t.Errorf("PUT %s: %d %s", body, r.status, r.body)
		}
	})...)
	rep := in.putUntilOK(t, "race-1", `{"quantity":77}`)

	rows := roundRows(t, st.db, "race-1")
	for _, r := range rows {
		if !strings.HasSuffix(r, ":true") {
			t.Errorf("round %s never went live", r)
		}
	}
	if most := ok.Load() + lost.Load() + 2; int64(len(rows)) > most {
		t.Errorf("%d rounds recorded (%v), want at most %d", len(rows), rows, most)
	}
	last := rows[len(rows)-1]
	if want := fmt.Sprintf("%d:77:true", *rep.RoundID); last != want {
		t.Fatalf("newest round %s, the last PUT answered %s", last, want)
	}
	if live := in.liveRound(t, st.rdb, "race-1"); live != *rep.RoundID {
		t.Fatalf("Redis's live round is %d, PostgreSQL's %d", live, *rep.RoundID)
	}
}
