package dates

import (
	"fmt"
	"strings"
	"time"
)

// Bounds on business_days so a call stays fast (at most ~100 years of days).
const (
	maxBusinessDays = 25000
	maxSpanDays     = 40000
)

func weekdayNames() []string {
	names := make([]string, 7)
	for d := time.Sunday; d <= time.Saturday; d++ {
		names[d] = d.String()
	}
	return names
}

type businessArgs struct {
	Start    string   `json:"start"`
	End      string   `json:"end"`
	Days     *int64   `json:"days"`
	Holidays []string `json:"holidays"`
	Weekend  []string `json:"weekend"`
}

type countResult struct {
	Start        string `json:"start"`
	End          string `json:"end"`
	BusinessDays int    `json:"business_days"`
	CalendarDays int    `json:"calendar_days"`
	WeekendDays  int    `json:"weekend_days"`
	Holidays     int    `json:"holidays"`
}

type moveResult struct {
	Start   string `json:"start"`
	Days    int64  `json:"days"`
	Result  string `json:"result"`
	Weekday string `json:"weekday"`
}

// businessDays counts business days from start to end, both included, or
// moves start by a number of business days.
func businessDays(a businessArgs) (any, *Error) {
	if err := required("start", a.Start); err != nil {
		return nil, err
	}
	start, err := parseDate("start", a.Start)
	if err != nil {
		return nil, err
	}
	offDays, err := weekendSet(a.Weekend)
	if err != nil {
		return nil, err
	}
	holidays := map[time.Time]bool{}
	for i, h := range a.Holidays {
		d, err := parseDate("holidays", h)
		if err != nil {
			err.Message = strings.Replace(err.Message, `argument "holidays"`, fmt.Sprintf(`argument "holidays" item %d`, i), 1)
			return nil, err
		}
		holidays[d] = true
	}
	business := func(d time.Time) bool { return !offDays[d.Weekday()] && !holidays[d] }

	switch {
	case (a.End == "") == (a.Days == nil):
		return nil, invalidf(`arguments "end" and "days": give exactly one: "end" (a date, to count business days) or "days" (an integer, to move by that many)`)
	case a.Days != nil:
		n := *a.Days
		if n > maxBusinessDays || n < -maxBusinessDays {
			return nil, invalidf("argument %q: %d is out of range; expected -%d to %d", "days", n, maxBusinessDays, maxBusinessDays)
		}
		step, left := 1, n
		if n < 0 {
			step, left = -1, -n
		}
		d := start
		for left > 0 {
			d = d.AddDate(0, 0, step)
			if business(d) {
				left--
			}
		}
		return moveResult{Start: a.Start, Days: n, Result: d.Format(time.DateOnly), Weekday: d.Weekday().String()}, nil
	}
	end, err := parseDate("end", a.End)
	if err != nil {
		return nil, err
	}
	if end.Before(start) {
		return nil, invalidf(`argument "end": %s is before start %s; expected a date on or after start`, a.End, a.Start)
	}
	span := int(end.Sub(start).Hours()/24) + 1
	if span > maxSpanDays {
		return nil, invalidf(`argument "end": the range has %d days; expected at most %d`, span, maxSpanDays)
	}
	r := countResult{Start: start.Format(time.DateOnly), End: end.Format(time.DateOnly), CalendarDays: span}
	for d := start; !d.After(end); d = d.AddDate(0, 0, 1) {
		switch {
		case offDays[d.Weekday()]:
			r.WeekendDays++
		case holidays[d]:
			r.Holidays++
		default:
			r.BusinessDays++
		}
	}
	return r, nil
}

// parseDate reads a plain date (or "today", UTC) as midnight UTC.
func parseDate(arg, value string) (time.Time, *Error) {
	if err := optional(arg, value); err != nil {
		return time.Time{}, err
	}
	in, err := parseInstant(arg, value, time.UTC)
	if err != nil {
		return time.Time{}, asError(err)
	}
	if !in.dateOnly {
		return time.Time{}, invalidf(`argument %q: %q has a time of day; expected a date "YYYY-MM-DD"`, arg, value)
	}
	return in.t, nil
}

// weekendSet reads the weekend argument (default Saturday and Sunday).
func weekendSet(names []string) (map[time.Weekday]bool, *Error) {
	set := map[time.Weekday]bool{}
	if names == nil {
		names = []string{"Saturday", "Sunday"}
	}
	for _, n := range names {
		found := false
		for d := time.Sunday; d <= time.Saturday; d++ {
			if strings.EqualFold(n, d.String()) || strings.EqualFold(n, d.String()[:3]) {
				set[d], found = true, true
			}
		}
		if !found {
			return nil, invalidf(`argument "weekend": %q is not a weekday; expected English names like "Saturday"`, n)
		}
	}
	if len(set) == 7 {
		return nil, invalidf(`argument "weekend": every day is a weekend day; leave at least one business day`)
	}
	return set, nil
}
