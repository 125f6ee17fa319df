package visitor

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shop-oss/shop/internal/outage"
)

// Report is the visitor counts of a range of days.
type Report struct {
	// SKU is empty for the whole storefront.
	SKU  string `json:"sku,omitempty"`
	From string `json:"from"`
	To   string `json:"to"`
	// UniqueVisitors counts a visitor once over the whole range (estimate).
	UniqueVisitors int64      `json:"unique_visitors"`
	Views          int64      `json:"views"`
	Days           []DayCount `json:"days"`
}

// DayCount is one day of a report.
type DayCount struct {
	Date           string `json:"date"`
	UniqueVisitors int64  `json:"unique_visitors"`
	Views          int64  `json:"views"`
}

// Report returns the counts of sku ("" for the storefront) from day from
// to day to, both included (the caller checks the range). It returns a
// 503 error when Redis does not answer.
func (s *Service) Report(ctx context.Context, sku string, from, to time.Time) (Report, error) {
	tag := sku
	if tag == "" {
		tag = siteTag
	}
	var dates, hlls, views []string
	for d := dayOf(from); !d.After(dayOf(to)); d = d.AddDate(0, 0, 1) {
		date := d.Format(dateLayout)
		dates = append(dates, date)
		hlls = append(hlls, s.hllKey(tag, date))
		views = append(views, s.viewsKey(tag, date))
	}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	pipe := s.rdb.Pipeline()
	total := pipe.PFCount(ctx, hlls...) // merges the days: one visitor once
	perDay := make([]*redis.IntCmd, len(hlls))
	for i, k := range hlls {
		perDay[i] = pipe.PFCount(ctx, k)
	}
	counts := pipe.MGet(ctx, views...)
	if _, err := pipe.Exec(ctx); err != nil {
		return Report{}, outage.Wrap(fmt.Sprintf("visitors of %q", sku), errRedisDown, err)
	}
	return assemble(sku, dates, total.Val(), perDay, counts.Val())
}

func assemble(sku string, dates []string, total int64, perDay []*redis.IntCmd, views []any) (Report, error) {
	r := Report{SKU: sku, From: dates[0], To: dates[len(dates)-1], UniqueVisitors: total, Days: make([]DayCount, len(dates))}
	for i, date := range dates {
		var n int64
		if raw, ok := views[i].(string); ok {
			if _, err := fmt.Sscan(raw, &n); err != nil {
				return Report{}, fmt.Errorf("views of %q on %s: %q: %w", sku, date, raw, err)
			}
		}
		r.Days[i] = DayCount{Date: date, UniqueVisitors: perDay[i].Val(), Views: n}
		r.Views += n
	}
	return r, nil
}
