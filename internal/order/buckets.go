package order

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/shop-oss/shop/internal/apperr"
	"github.com/shop-oss/shop/internal/inventory"
)

// Purchases from a round split over stock buckets (docs/design/buckets.md):
// each line is decided on the buyer's home bucket; a refusal because the
// guess of the round's buckets was stale, or because the home bucket ran
// dry while the round has units, is answered by learning the buckets or
// moving units in, and the same order id is placed again.

// bucketRetryBudget bounds how long one order keeps being placed again:
// each retry follows a stale guess of the buckets (once per SKU and round
// in a process), a race lost for units moved in (someone else bought
// them: the sale went on), or units still on their way from another
// bucket (a move's steps take milliseconds, longer on a loaded host). A
// count of tries ran out in about 250 ms while the last units of a
// 16-bucket round were in flight on a busy cluster; time is the budget.
const bucketRetryBudget = 2 * time.Second

// maxBucketPause caps the wait before a placement's third and later
// tries, so shoppers homed in different dry buckets stop trading the
// same units and a move under way can land.
const maxBucketPause = 64 * time.Millisecond

// errBucketsBusy answers a placement that kept losing those races: a
// retry, never an out_of_stock the round as a whole does not bear out.
var errBucketsBusy = apperr.Unavailable("the stock is being rebalanced; retry with the same Idempotency-Key")

// wrongBucketError: a line went to a bucket that is not the buyer's home
// (the round's buckets were not what this process thought). Past the
// last try it answers a retry.
type wrongBucketError struct{ skus []string }

func (e *wrongBucketError) Error() string {
	return fmt.Sprintf("order: not the home bucket for %v", e.skus)
}
func (e *wrongBucketError) Unwrap() error { return errBucketsBusy }

// shortError: a line's home bucket had too few units (some of skus may be
// unbucketed, simply out of stock). Unwrapped, it is out_of_stock; a
// placer moves units in and tries again instead (inBuckets).
type shortError struct{ skus []string }

func (e *shortError) Error() string { return fmt.Sprintf("order: home buckets short of %v", e.skus) }
func (e *shortError) Unwrap() error { return withSKUs(ErrOutOfStock, e.skus) }

// reserveInBuckets is reserve, placed again after a stale guess of the
// buckets or with units moved into a dry home bucket.
func (s *Service) reserveInBuckets(ctx context.Context, e enqueue, lines []Line) (reservation, error) {
	var res reservation
	err := s.inBuckets(ctx, e.userID, lines, func() (err error) {
		res, err = s.reserve(ctx, e, lines)
		return err
	})
	return res, err
}

// InBuckets runs place (a placement of user's lines, by the saga on a
// cluster) and runs it again after a stale guess of the buckets or with
// units moved into a dry home bucket, as a single Redis's placement does.
func (k Kit) InBuckets(ctx context.Context, user string, lines []Line, place func() error) error {
	return k.s.inBuckets(ctx, user, lines, place)
}

func (s *Service) inBuckets(ctx context.Context, user string, lines []Line, place func() error) error {
	var giveUp time.Time // read at the first retry: a placement that succeeds at once reads no clock
	for try := 1; ; try++ {
		err := place()
		var wrong *wrongBucketError
		var short *shortError
		var noSale *noSaleError
		switch {
		case errors.As(err, &wrong):
			err = s.learnBuckets(ctx, wrong.skus)
		case errors.As(err, &noSale) && s.guessedBuckets(noSale.skus):
			// The guessed home bucket is gone: a reseeding left fewer.
			err = s.learnBuckets(ctx, noSale.skus)
		case errors.As(err, &short):
			err = s.moveUnits(ctx, user, lines, short.skus)
		case errors.Is(err, ErrPassRequired) && s.stock.Partitions().Grouped():
			// A cluster's bucket reads a copy of the room's pass: copy
			// it, unless it was there (then the refusal stands).
			if copied, cerr := s.copyPasses(ctx, user, lines); cerr != nil || !copied {
				return err
			}
			err = nil
		default:
			return err
		}
		if err != nil {
			return err
		}
		switch now := time.Now(); {
		case try == 1:
			giveUp = now.Add(bucketRetryBudget)
		case now.After(giveUp):
			return errBucketsBusy
		}
		if err := pauseBeforeTry(ctx, try+1); err != nil {
			return err
		}
	}
}

// pauseBeforeTry waits before try: not at all before the second (a
// stale guess learnt, or units just moved in), then a jittered pause
// doubling from a millisecond up to maxBucketPause.
func pauseBeforeTry(ctx context.Context, try int) error {
	if try <= 2 {
		return nil
	}
	d := min(time.Millisecond<<min(try-3, 16), maxBucketPause)
	d = d/2 + rand.N(d/2+1) //nolint:gosec // spreading retries, no secret
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return errBucketsBusy
	case <-t.C:
		return nil
	}
}

// guessedBuckets tells whether any of skus was placed in a bucket past
// the first, as this process last knew the round: such a bucket may be
// missing because the round was reseeded with fewer, not for want of a sale.
func (s *Service) guessedBuckets(skus []string) bool {
	for _, sku := range skus {
		if s.stock.BucketsHint(sku) > 1 {
			return true
		}
	}
	return false
}

func (s *Service) learnBuckets(ctx context.Context, skus []string) error {
	for _, sku := range skus {
		if _, err := s.stock.LearnBuckets(ctx, sku); err != nil {
			return err
		}
	}
	return nil
}

// moveUnits moves units into user's home bucket of each short line that
// is bucketed. Lines the round as a whole cannot serve (and unbucketed
// ones, short in their only bucket) are the out_of_stock answer.
func (s *Service) moveUnits(ctx context.Context, user string, lines []Line, skus []string) error {
	var out, over []string
	for _, sku := range skus {
		buckets, err := s.stock.LearnBuckets(ctx, sku)
		if err != nil {
			return err
		}
		if buckets <= 1 {
			out = append(out, sku)
			continue
		}
		home, need := inventory.HomeBucket(user, buckets), quantityOf(lines, sku)
		err = s.stock.MoveInto(ctx, sku, home, need, buckets)
		switch {
		case errors.Is(err, inventory.ErrRoundShort):
			// The home was dry when the shopper was within the limit; a
			// purchase of theirs since may have put them past it, and the
			// limit outranks the stock (lines.lua): the move does not read
			// the shopper's count, so it is read now.
			past, err := s.stock.PastLimit(ctx, sku, user, home, buckets, need)
			if err != nil {
				return err
			}
			if past {
				over = append(over, sku)
			} else {
				out = append(out, sku)
			}
		case err != nil && !errors.Is(err, inventory.ErrBucketsChanging):
			return err
		}
	}
	if len(over) > 0 {
		return withSKUs(ErrLimitExceeded, over)
	}
	if len(out) > 0 {
		return withSKUs(ErrOutOfStock, out)
	}
	return nil
}

func quantityOf(lines []Line, sku string) int {
	for _, l := range lines {
		if l.SKU == sku {
			return l.Quantity
		}
	}
	return 0
}
