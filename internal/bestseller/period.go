package bestseller

import (
	"fmt"
	"time"
)

// Period is a board's span of time, in UTC.
type Period string

// The periods of docs/api.md.
const (
	Day   Period = "day"
	Week  Period = "week"
	Month Period = "month"
	All   Period = "all"
)

// Periods lists every period, all time last.
var Periods = []Period{Day, Week, Month, All}

// ParsePeriod reads a period name; "" is Day.
func ParsePeriod(s string) (Period, bool) {
	if s == "" {
		return Day, true
	}
	for _, p := range Periods {
		if string(p) == s {
			return p, true
		}
	}
	return "", false
}

const dateLayout = "2006-01-02"

// span returns the id of the period holding t and its bounds [start, end);
// All has id "all" and zero bounds.
func (p Period) span(t time.Time) (id string, start, end time.Time) {
	t = t.UTC()
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	switch p {
	case Day:
		return day.Format(dateLayout), day, day.AddDate(0, 0, 1)
	case Week:
		// ISO weeks start on Monday; the ISO year may differ from t's.
		start = day.AddDate(0, 0, -((int(day.Weekday()) + 6) % 7))
		y, w := t.ISOWeek()
		return fmt.Sprintf("%04d-W%02d", y, w), start, start.AddDate(0, 0, 7)
	case Month:
		start = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
		return start.Format("2006-01"), start, start.AddDate(0, 1, 0)
	}
	return "all", time.Time{}, time.Time{}
}

// expiry is when the board of the period holding t expires: at the end of
// the next period (zero for All, which never expires).
func (p Period) expiry(t time.Time) time.Time {
	if p == All {
		return time.Time{}
	}
	_, _, end := p.span(t)
	_, _, next := p.span(end)
	return next
}

// keys names the package's Redis keys; all share the {bestsellers} tag.
type keys struct{ prefix string }

func (k keys) tag() string { return k.prefix + "{bestsellers}:" }

// board is the key of the board of period p holding t.
func (k keys) board(p Period, t time.Time) string {
	id, _, _ := p.span(t)
	if p == All {
		return k.tag() + "all"
	}
	return k.tag() + string(p) + ":" + id
}

// marks is the hash of the marks of orders created on t's UTC day.
func (k keys) marks(t time.Time) string { return k.tag() + "orders:" + t.UTC().Format(dateLayout) }

// gen is the counter every change of a board bumps.
func (k keys) gen() string { return k.tag() + "gen" }

// markExpiry is when the marks of an order created at t may go: markRetention
// past its day, and never sooner than a day after now.
func markExpiry(t, now time.Time) time.Time {
	_, day, _ := Day.span(t)
	return maxTime(day.Add(markRetention), now.Add(24*time.Hour))
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
