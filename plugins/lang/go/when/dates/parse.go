package dates

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	// The sandbox has no /usr/share/zoneinfo: embed the IANA database in the
	// binary (about 450 KB) so that time.LoadLocation works everywhere.
	_ "time/tzdata"
)

// instant is a parsed date/time argument.
type instant struct {
	t        time.Time
	dateOnly bool   // given as YYYY-MM-DD (or "today"): no time of day
	note     string // why a local time was read differently, or ""
}

// InstantFormats describes what parseInstant accepts, for schemas and errors.
const InstantFormats = `RFC 3339 like "2024-03-10T14:30:00Z" or "2024-03-10T14:30:00+01:00", ` +
	`a local time without offset like "2024-03-10T14:30:00" (read in the timezone argument, default UTC), ` +
	`a date "2024-03-10", or "now" / "today"`

// Local layouts (no offset), tried in order after RFC 3339.
var localLayouts = []string{
	wallLayout,
	"2006-01-02T15:04",
}

// clock is the source of "now"; tests replace it.
var clock = time.Now

// parseInstant reads the argument `arg`; times without an offset are wall
// times in loc.
func parseInstant(arg, value string, loc *time.Location) (instant, error) {
	v := strings.TrimSpace(value)
	switch strings.ToLower(v) {
	case "now":
		return instant{t: clock().In(loc)}, nil
	case "today":
		y, m, d := clock().In(loc).Date()
		return instant{t: time.Date(y, m, d, 0, 0, 0, 0, loc), dateOnly: true}, nil
	}
	// "2024-03-10 14:30" is common in prose: accept a space for the T.
	if len(v) > 10 && v[10] == ' ' {
		v = v[:10] + "T" + v[11:]
	}
	if len(v) == len(time.DateOnly) {
		w, err := time.Parse(time.DateOnly, v)
		if err != nil {
			return instant{}, badInstant(arg, value, rangeReason(err))
		}
		return inZone(w, loc, true), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return instant{t: t}, nil
	} else if reason := rangeReason(err); reason != "" {
		return instant{}, badInstant(arg, value, reason)
	}
	for _, layout := range localLayouts {
		if w, err := time.Parse(layout, v); err == nil {
			return inZone(w, loc, false), nil
		} else if reason := rangeReason(err); reason != "" {
			return instant{}, badInstant(arg, value, reason)
		}
	}
	return instant{}, badInstant(arg, value, "")
}

// wallLayout formats a wall clock reading without its zone.
const wallLayout = "2006-01-02T15:04:05.999999999"

// inZone reads the wall clock of w (parsed as UTC) in loc. Around DST
// changes a wall time may not exist (it is moved forward by the gap) or may
// happen twice (the earlier is used); the note says so.
func inZone(w time.Time, loc *time.Location, dateOnly bool) instant {
	t := wallTime(w, loc)
	in := instant{t: t, dateOnly: dateOnly}
	if t.Format(wallLayout) != w.Format(wallLayout) {
		in.note = fmt.Sprintf("%s does not exist in %s (the clocks skip it for DST); it was moved forward to %s",
			w.Format(wallLayout), loc, t.Format(time.RFC3339Nano))
		return in
	}
	for _, d := range []time.Duration{-2 * time.Hour, -time.Hour, -30 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour} {
		if other := t.Add(d); other.Format(wallLayout) == w.Format(wallLayout) {
			in.note = fmt.Sprintf("%s happens twice in %s (the clocks go back for DST); %s was used, the other is %s",
				w.Format(wallLayout), loc, t.Format(time.RFC3339Nano), other.Format(time.RFC3339Nano))
			break
		}
	}
	return in
}

// rangeReason returns why a string that had the right shape was refused
// ("month out of range", "day out of range", ...), or "" if the shape was
// wrong.
func rangeReason(err error) string {
	var pe *time.ParseError
	if errors.As(err, &pe) && pe.Message != "" {
		return strings.TrimPrefix(pe.Message, ": ")
	}
	return ""
}

func badInstant(arg, value, reason string) error {
	if reason != "" {
		return invalidf("argument %q: %q is not a valid date/time (%s); expected %s", arg, value, reason, InstantFormats)
	}
	return invalidf("argument %q: %q is not a date/time; expected %s", arg, value, InstantFormats)
}

// ZoneFormats describes what parseZone accepts.
const ZoneFormats = `an IANA time zone name such as "Europe/Paris", "America/New_York" or "UTC" ` +
	`(case-sensitive), or a fixed offset like "+05:30"`

// parseZone reads a time zone argument: an IANA name or a fixed offset.
func parseZone(arg, name string) (*time.Location, error) {
	n := strings.TrimSpace(name)
	switch {
	case n == "" || n == "Local":
		// "" and "Local" mean the machine's zone to Go; a sandbox has none.
		return nil, invalidf("argument %q: %q is not a time zone; expected %s", arg, name, ZoneFormats)
	case n == "Z" || strings.EqualFold(n, "UTC") || strings.EqualFold(n, "GMT"):
		return time.UTC, nil
	}
	// A fixed offset: +HH:MM or +HHMM.
	if hhmm := strings.Replace(n, ":", "", 1); len(hhmm) == 5 && (n[0] == '+' || n[0] == '-') && digits(hhmm[1:]) == 4 {
		h, _ := strconv.Atoi(hhmm[1:3])
		min, _ := strconv.Atoi(hhmm[3:])
		if h > 18 || min > 59 {
			return nil, invalidf("argument %q: offset %q is out of range; expected -18:00 to +18:00", arg, name)
		}
		secs := h*3600 + min*60
		if n[0] == '-' {
			secs = -secs
		}
		return time.FixedZone(fmt.Sprintf("%s:%s", hhmm[:3], hhmm[3:]), secs), nil
	}
	loc, err := time.LoadLocation(n)
	if err != nil {
		return nil, invalidf("argument %q: unknown time zone %q; expected %s", arg, name, ZoneFormats)
	}
	return loc, nil
}

// span is an amount of time: calendar parts, applied to the wall clock, and
// an exact part, applied to the instant.
type span struct {
	years, months, days int64
	exact               time.Duration
}

func (s span) calendarOnly() bool { return s.exact == 0 }

// DurationFormats describes what parseSpan accepts.
const DurationFormats = `Go style like "1h30m", "-90m", "1.5h", extended with calendar units ` +
	`"y" (years), "mo" (months), "w" (weeks), "d" (days) as in "1y2mo3d4h" or "2w 3d"; ` +
	`or ISO 8601 like "P3DT4H", "P1Y2M", "PT45M", "P2W", "-P1D"`

// Limits that keep results inside years 1 to 9999 without overflow.
const (
	maxYears  = 10000
	maxMonths = maxYears * 12
	maxDays   = maxYears * 366
)

// parseSpan reads a duration argument. (Hand-written rather than with
// regexp: the regexp package adds about 0.5 MB to the component.)
func parseSpan(arg, value string) (span, error) {
	v := strings.TrimSpace(value)
	bad := func(why string) (span, error) {
		if why != "" {
			why = " (" + why + ")"
		}
		return span{}, invalidf("argument %q: %q is not a duration%s; expected %s", arg, value, why, DurationFormats)
	}
	neg := false
	if v != "" && (v[0] == '-' || v[0] == '+') {
		neg, v = v[0] == '-', strings.TrimSpace(v[1:])
	}
	if v == "" {
		return bad("it is empty")
	}
	var s span
	var err error
	if v[0] == 'P' || v[0] == 'p' {
		s, err = parseISO(strings.ToUpper(v[1:]))
	} else {
		s, err = parseCompact(v)
	}
	if err != nil {
		return bad(err.Error())
	}
	if neg {
		s = s.negate()
	}
	return s, nil
}

// parseCompact reads "1y2mo3d4h5m6s", "1.5h", "2 weeks, 3 days".
func parseCompact(v string) (span, error) {
	var s span
	seen := map[string]bool{}
	for v != "" {
		n := digits(v)
		if n > 0 && n+1 < len(v) && v[n] == '.' && digits(v[n+1:]) > 0 {
			n += 1 + digits(v[n+1:])
		}
		if n == 0 {
			return s, fmt.Errorf("cannot read %q: expected a number", v)
		}
		num := v[:n]
		v = strings.TrimLeft(v[n:], " ")
		u := 0
		for u < len(v) && (v[u]|0x20 >= 'a' && v[u]|0x20 <= 'z' || strings.HasPrefix(v[u:], "µ")) {
			if v[u] < 0x80 {
				u++
			} else {
				u += len("µ")
			}
		}
		if u == 0 {
			return s, fmt.Errorf("%s needs a unit", num)
		}
		unit := canonicalUnit(v[:u])
		if unit == "" {
			return s, fmt.Errorf("unknown unit %q", v[:u])
		}
		if seen[unit] {
			return s, fmt.Errorf("unit %q appears twice", v[:u])
		}
		seen[unit] = true
		if err := s.addPart(num, unit); err != nil {
			return s, err
		}
		v = strings.TrimLeft(v[u:], " ,")
	}
	return s, nil
}

// parseISO reads an ISO 8601 duration after its "P", upper-cased:
// [nY][nM][nW][nD][T[nH][nM][n[.n]S]].
func parseISO(v string) (span, error) {
	var s span
	units := "YMWD" // what may still come, in order
	inTime, parts := false, false
	for v != "" {
		if v[0] == 'T' && !inTime {
			inTime, units, v = true, "HMS", v[1:]
			if v == "" {
				return s, errors.New(`nothing follows "T"`)
			}
			continue
		}
		n := digits(v)
		if n > 0 && n+1 < len(v) && (v[n] == '.' || v[n] == ',') && digits(v[n+1:]) > 0 {
			n += 1 + digits(v[n+1:])
		}
		if n == 0 || n == len(v) {
			return s, fmt.Errorf("cannot read %q: expected a number and one of the letters %s", v, units)
		}
		at := strings.IndexByte(units, v[n])
		if at < 0 {
			return s, fmt.Errorf("%q is out of place: expected one of the letters %s here", v[n], units)
		}
		units = units[at+1:]
		unit := map[string]string{"Y": "y", "M": "mo", "W": "w", "D": "d"}[string(v[n])]
		if inTime {
			unit = strings.ToLower(string(v[n]))
		}
		if strings.ContainsAny(v[:n], ".,") && unit != "s" {
			return s, errors.New("only seconds may have a fraction")
		}
		if err := s.addPart(strings.Replace(v[:n], ",", ".", 1), unit); err != nil {
			return s, err
		}
		v, parts = v[n+1:], true
	}
	if !parts {
		return s, errors.New(`an ISO 8601 duration needs at least one part after "P"`)
	}
	return s, nil
}

// digits returns the length of the run of ASCII digits that starts v.
func digits(v string) int {
	n := 0
	for n < len(v) && v[n] >= '0' && v[n] <= '9' {
		n++
	}
	return n
}

// canonicalUnit maps the spellings of a unit to one name, or "".
func canonicalUnit(u string) string {
	switch strings.ToLower(u) {
	case "y", "yr", "yrs", "year", "years":
		return "y"
	case "mo", "mon", "month", "months":
		return "mo"
	case "w", "wk", "wks", "week", "weeks":
		return "w"
	case "d", "day", "days":
		return "d"
	case "h", "hr", "hrs", "hour", "hours":
		return "h"
	case "m", "min", "mins", "minute", "minutes":
		return "m"
	case "s", "sec", "secs", "second", "seconds":
		return "s"
	case "ms":
		return "ms"
	case "us", "µs":
		return "us"
	case "ns":
		return "ns"
	}
	return ""
}

var exactUnits = map[string]time.Duration{
	"h": time.Hour, "m": time.Minute, "s": time.Second,
	"ms": time.Millisecond, "us": time.Microsecond, "ns": time.Nanosecond,
}

// addPart adds `num` of `unit` to s.
func (s *span) addPart(num, unit string) error {
	if d, ok := exactUnits[unit]; ok {
		f, err := strconv.ParseFloat(num, 64)
		total := float64(s.exact) + f*float64(d)
		if err != nil || math.Abs(total) >= math.MaxInt64/2 {
			return fmt.Errorf("%s%s is too large: hours, minutes and seconds add up to at most about 290 years", num, unit)
		}
		s.exact = time.Duration(math.Round(total))
		return nil
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		if strings.Contains(num, ".") {
			return fmt.Errorf("calendar units take whole numbers, found %s%s", num, unit)
		}
		return fmt.Errorf("%s%s is too large", num, unit)
	}
	switch unit {
	case "y":
		s.years += n
	case "mo":
		s.months += n
	case "w":
		s.days += 7 * n
	case "d":
		s.days += n
	}
	if s.years > maxYears || s.months > maxMonths || s.days > maxDays {
		return fmt.Errorf("%s%s is too large: at most %d years", num, unit, maxYears)
	}
	return nil
}

func (s span) negate() span {
	return span{-s.years, -s.months, -s.days, -s.exact}
}

// addSpan adds s to t in loc: years and months first (a day that does not
// exist in the target month becomes its last day: Jan 31 + 1 month = Feb 28
// or 29), then days on the wall clock (so a day across a DST change is 23 or
// 25 hours), then the exact part. clamped reports the month-end clamp.
func addSpan(t time.Time, s span, loc *time.Location) (result time.Time, clamped bool) {
	t = t.In(loc)
	y, mo, d := t.Date()
	hh, mm, ss := t.Clock()
	months := int64(y)*12 + int64(mo-1) + s.years*12 + s.months
	ny, nm := int(months/12), time.Month(months%12+1)
	if months < 0 { // keep the month in 1..12 for negative years
		ny, nm = int((months-11)/12), time.Month((months%12+12)%12+1)
	}
	if last := daysIn(ny, nm); d > last {
		d, clamped = last, true
	}
	wall := time.Date(ny, nm, d+int(s.days), hh, mm, ss, t.Nanosecond(), time.UTC)
	return wallTime(wall, loc).Add(s.exact), clamped
}

// daysIn returns the number of days of a month.
func daysIn(year int, month time.Month) int {
	return time.Date(year, month+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// wallTime returns the instant whose wall clock in loc reads like w (whose
// zone is ignored). time.Date leaves the choice open in a DST gap, and in
// practice moves such times back; like most calendar libraries (java.time,
// JavaScript's Temporal) this moves them forward by the gap instead, and in
// an overlap takes the earlier instant.
func wallTime(w time.Time, loc *time.Location) time.Time {
	y, mo, d := w.Date()
	hh, mm, ss := w.Clock()
	t := time.Date(y, mo, d, hh, mm, ss, w.Nanosecond(), loc)
	if t.Format(wallLayout) == w.Format(wallLayout) {
		return t
	}
	// In a gap: read the wall time with the offset in force a day earlier,
	// i.e. before the clocks jumped.
	_, before := time.Date(y, mo, d-1, hh, mm, ss, 0, loc).Zone()
	naive := time.Date(y, mo, d, hh, mm, ss, w.Nanosecond(), time.UTC)
	return naive.Add(-time.Duration(before) * time.Second).In(loc)
}
