// Package dates is the logic of the `when` plugin: date arithmetic,
// differences, time zone conversion and business days. It knows nothing of
// WebAssembly, so `go test` runs it natively; main.go adapts it to the
// generated bindings.
package dates

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
)

// Kind mirrors the WIT enum error-kind (only the kinds this plugin uses).
type Kind int

const (
	InvalidInput Kind = iota
	NotFound
	Internal
)

// Error is a failed call: the message is what the model reads.
type Error struct {
	Kind    Kind
	Message string
}

func (e *Error) Error() string { return e.Message }

func invalidf(format string, args ...any) *Error {
	return &Error{InvalidInput, fmt.Sprintf(format, args...)}
}

// Spec is one tool offered to the model.
type Spec struct {
	Name        string
	Description string
	InputSchema string // a JSON Schema object
}

// Inputs longer than this are refused before parsing (the schemas say so too).
const maxArg = 200

type prop map[string]any

func str(description string) prop {
	return prop{"type": "string", "description": description, "maxLength": maxArg}
}

func schema(props map[string]prop, required ...string) string {
	if required == nil {
		required = []string{}
	}
	b, _ := json.Marshal(map[string]any{
		"type":                 "object",
		"properties":           props,
		"required":             required,
		"additionalProperties": false,
	})
	return string(b)
}

// Specs lists the tools. It touches nothing of the environment: the host
// calls it at load time with no grants.
func Specs() []Spec {
	zoneArg := str("Time zone for inputs without an offset and for the result: " + ZoneFormats + ". Default: the input's own offset, or UTC.")
	return []Spec{
		{
			Name: "datetime_add",
			Description: "Add (or subtract) a duration to a date/time, in a real time zone: " +
				"calendar units (years, months, weeks, days) move the wall clock, so one day across a " +
				"DST change keeps the time of day; Jan 31 + 1 month is the last day of February. " +
				"Returns the result, its weekday and Unix time as JSON.",
			InputSchema: schema(map[string]prop{
				"datetime": str("Starting point: " + InstantFormats + "."),
				"duration": str("Amount to add, negative to subtract: " + DurationFormats + "."),
				"timezone": zoneArg,
			}, "datetime", "duration"),
		},
		{
			Name: "datetime_diff",
			Description: "Time between two dates/times: signed totals in seconds, minutes, hours and days, " +
				"an exact breakdown (days, hours, minutes, seconds) and a calendar one (years, months, days, ...) " +
				"with human-readable readings, as JSON.",
			InputSchema: schema(map[string]prop{
				"from":     str("Start: " + InstantFormats + "."),
				"to":       str("End: " + InstantFormats + "."),
				"timezone": str("Time zone for inputs without an offset and for the calendar breakdown: " + ZoneFormats + ". Default: UTC."),
			}, "from", "to"),
		},
		{
			Name: "timezone_convert",
			Description: "Convert a date/time to another time zone (IANA names with full DST rules, " +
				"e.g. \"Asia/Tokyo\"): the local time there, its UTC offset, abbreviation and whether DST is in effect, as JSON.",
			InputSchema: schema(map[string]prop{
				"datetime": str("The date/time: " + InstantFormats + "."),
				"to":       str("Target time zone: " + ZoneFormats + "."),
				"from":     str("Time zone of a datetime given without offset: " + ZoneFormats + ". Default: UTC. Ignored when the datetime has an offset."),
			}, "datetime", "to"),
		},
		{
			Name: "business_days",
			Description: "Business days (weekdays that are not holidays): with `end`, count them between two dates, " +
				"both included; with `days`, find the date that many business days after (or before, if negative) `start`.",
			InputSchema: schema(map[string]prop{
				"start": str(`First date, "YYYY-MM-DD" (or "today", UTC).`),
				"end":   str(`Last date, "YYYY-MM-DD", included in the count. Give either end or days.`),
				"days": {"type": "integer", "minimum": -maxBusinessDays, "maximum": maxBusinessDays,
					"description": "Number of business days to move from start (negative: backwards). Give either end or days."},
				"holidays": {"type": "array", "maxItems": 1000, "description": `Dates that are not business days, "YYYY-MM-DD".`,
					"items": prop{"type": "string", "maxLength": 10}},
				"weekend": {"type": "array", "maxItems": 6, "description": `Weekdays that are not business days. Default: ["Saturday", "Sunday"].`,
					"items": prop{"type": "string", "enum": weekdayNames()}},
			}, "start"),
		},
	}
}

// Call runs tool `name` with JSON `arguments` and returns the result text.
func Call(name, arguments string) (string, *Error) {
	var result any
	var err *Error
	switch name {
	case "datetime_add":
		var a struct{ Datetime, Duration, Timezone string }
		if err = decode(arguments, &a); err == nil {
			result, err = dateAdd(a.Datetime, a.Duration, a.Timezone)
		}
	case "datetime_diff":
		var a struct{ From, To, Timezone string }
		if err = decode(arguments, &a); err == nil {
			result, err = dateDiff(a.From, a.To, a.Timezone)
		}
	case "timezone_convert":
		var a struct{ Datetime, To, From string }
		if err = decode(arguments, &a); err == nil {
			result, err = convert(a.Datetime, a.To, a.From)
		}
	case "business_days":
		var a businessArgs
		if err = decode(arguments, &a); err == nil {
			result, err = businessDays(a)
		}
	default:
		return "", &Error{NotFound, fmt.Sprintf("this plugin has no tool %q; it offers datetime_add, datetime_diff, timezone_convert, business_days", name)}
	}
	if err != nil {
		return "", err
	}
	out, jerr := json.MarshalIndent(result, "", "  ")
	if jerr != nil {
		return "", &Error{Internal, "encoding the result: " + jerr.Error()}
	}
	return string(out), nil
}

// decode reads the arguments object. The host has validated it against the
// schema; this catches what a schema cannot (and direct callers).
func decode(arguments string, into any) *Error {
	d := json.NewDecoder(strings.NewReader(arguments))
	d.DisallowUnknownFields()
	if err := d.Decode(into); err != nil {
		return invalidf("arguments: %v; expected a JSON object with the properties of the tool's schema", err)
	}
	return nil
}

// Check that a required string argument is present and short.
func required(arg, value string) *Error {
	if strings.TrimSpace(value) == "" {
		return invalidf("argument %q is required and must not be empty", arg)
	}
	return optional(arg, value)
}

func optional(arg, value string) *Error {
	if len(value) > maxArg {
		return invalidf("argument %q is %d bytes long; expected at most %d", arg, len(value), maxArg)
	}
	return nil
}

// requireAll checks required arguments given as name, value pairs, in
// order, so the first missing one is always the one named.
func requireAll(pairs ...string) *Error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := required(pairs[i], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// zoneOr parses an optional zone argument, falling back to def.
func zoneOr(arg, value string, def *time.Location) (*time.Location, *Error) {
	if err := optional(arg, value); err != nil {
		return nil, err
	}
	if value == "" {
		return def, nil
	}
	loc, err := parseZone(arg, value)
	if err != nil {
		return nil, err.(*Error)
	}
	return loc, nil
}

// asError turns the parse helpers' error into *Error.
func asError(err error) *Error {
	if err == nil {
		return nil
	}
	if e, ok := err.(*Error); ok {
		return e
	}
	return &Error{Internal, err.Error()}
}

// The result of datetime_add.
type addResult struct {
	Result   string `json:"result"`
	Weekday  string `json:"weekday"`
	Timezone string `json:"timezone"`
	Unix     int64  `json:"unix_seconds"`
	Note     string `json:"note,omitempty"`
}

func dateAdd(datetime, duration, zone string) (any, *Error) {
	if err := requireAll("datetime", datetime, "duration", duration); err != nil {
		return nil, err
	}
	loc, e := zoneOr("timezone", zone, time.UTC)
	if e != nil {
		return nil, e
	}
	start, err := parseInstant("datetime", datetime, loc)
	if err != nil {
		return nil, asError(err)
	}
	s, err := parseSpan("duration", duration)
	if err != nil {
		return nil, asError(err)
	}
	// Without a timezone argument, work in the input's own offset.
	if zone == "" {
		loc = start.t.Location()
	}
	out, clamped := addSpan(start.t, s, loc)
	if y := out.Year(); y < 1 || y > 9999 {
		return nil, invalidf("argument %q: the result falls in year %d; results must be within years 1 to 9999", "duration", y)
	}
	r := addResult{Weekday: out.Weekday().String(), Timezone: zoneName(out), Unix: out.Unix()}
	if start.dateOnly && s.calendarOnly() {
		r.Result = out.Format(time.DateOnly)
	} else {
		r.Result = out.Format(time.RFC3339Nano)
	}
	r.Note = start.note
	if clamped {
		r.Note = joinNotes(r.Note, "the day did not exist in the target month, so the month's last day was used")
	}
	if start.dateOnly && !s.calendarOnly() {
		r.Note = joinNotes(r.Note, "the date was read as midnight")
	}
	return r, nil
}

// zoneName names t's zone for the result: the IANA name, or the offset.
func zoneName(t time.Time) string {
	if name := t.Location().String(); name != "" && !strings.HasPrefix(name, "+") && !strings.HasPrefix(name, "-") {
		return name
	}
	return t.Format("-07:00")
}

func joinNotes(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// The result of datetime_diff.
type diffResult struct {
	From         string  `json:"from"`
	To           string  `json:"to"`
	Direction    string  `json:"direction"`
	TotalSeconds float64 `json:"total_seconds"`
	TotalMinutes float64 `json:"total_minutes"`
	TotalHours   float64 `json:"total_hours"`
	TotalDays    float64 `json:"total_days"`
	Exact        exact   `json:"exact"`
	Human        string  `json:"human"`
	Calendar     cal     `json:"calendar"`
	CalendarText string  `json:"calendar_human"`
}

type exact struct {
	Days    int64   `json:"days"`
	Hours   int64   `json:"hours"`
	Minutes int64   `json:"minutes"`
	Seconds float64 `json:"seconds"`
}

type cal struct {
	Years   int     `json:"years"`
	Months  int     `json:"months"`
	Days    int     `json:"days"`
	Hours   int     `json:"hours"`
	Minutes int     `json:"minutes"`
	Seconds float64 `json:"seconds"`
}

func dateDiff(from, to, zone string) (any, *Error) {
	if err := requireAll("from", from, "to", to); err != nil {
		return nil, err
	}
	loc, e := zoneOr("timezone", zone, time.UTC)
	if e != nil {
		return nil, e
	}
	a, err := parseInstant("from", from, loc)
	if err != nil {
		return nil, asError(err)
	}
	b, err := parseInstant("to", to, loc)
	if err != nil {
		return nil, asError(err)
	}
	// Subtract in whole seconds plus nanoseconds: time.Time.Sub saturates
	// at about 292 years.
	secs := b.t.Unix() - a.t.Unix()
	nanos := int64(b.t.Nanosecond() - a.t.Nanosecond())
	if secs > 0 && nanos < 0 {
		secs, nanos = secs-1, nanos+1e9
	} else if secs < 0 && nanos > 0 {
		secs, nanos = secs+1, nanos-1e9
	}
	total := float64(secs) + float64(nanos)/1e9
	r := diffResult{
		From: a.t.Format(time.RFC3339Nano), To: b.t.Format(time.RFC3339Nano),
		TotalSeconds: round6(total), TotalMinutes: round6(total / 60),
		TotalHours: round6(total / 3600), TotalDays: round6(total / 86400),
	}
	switch {
	case total > 0:
		r.Direction = "to is after from"
	case total < 0:
		r.Direction = "to is before from"
	default:
		r.Direction = "same instant"
	}
	// The breakdown in integers, so that nanoseconds survive any span.
	if secs < 0 || nanos < 0 {
		secs, nanos = -secs, -nanos
	}
	r.Exact = exact{secs / 86400, secs / 3600 % 24, secs / 60 % 60, round9(float64(secs%60) + float64(nanos)/1e9)}
	r.Human = human([]part{{float64(r.Exact.Days), "day"}, {float64(r.Exact.Hours), "hour"},
		{float64(r.Exact.Minutes), "minute"}, {r.Exact.Seconds, "second"}})
	// The calendar breakdown is read on the wall clock of one zone.
	early, late := a.t.In(loc), b.t.In(loc)
	if total < 0 {
		early, late = late, early
	}
	r.Calendar = calendarDiff(early, late)
	c := r.Calendar
	r.CalendarText = human([]part{{float64(c.Years), "year"}, {float64(c.Months), "month"}, {float64(c.Days), "day"},
		{float64(c.Hours), "hour"}, {float64(c.Minutes), "minute"}, {c.Seconds, "second"}})
	return r, nil
}

// calendarDiff breaks late-early (early <= late, same zone) into whole
// months, then whole days, then the rest, the way people count: from Jan 31
// to Mar 1 is 1 month and 1 day (Jan 31 + 1 month = Feb 29 in 2024).
func calendarDiff(early, late time.Time) cal {
	loc := early.Location()
	ey, em, _ := early.Date()
	ly, lm, _ := late.Date()
	months := (ly-ey)*12 + int(lm-em)
	var base time.Time
	for ; months >= 0; months-- {
		base, _ = addSpan(early, span{months: int64(months)}, loc)
		if !base.After(late) {
			break
		}
	}
	if months < 0 {
		months, base = 0, early
	}
	days := 0
	for {
		next, _ := addSpan(base, span{days: int64(days + 1)}, loc)
		if next.After(late) {
			break
		}
		days++
	}
	dayBase, _ := addSpan(base, span{days: int64(days)}, loc)
	rest := late.Sub(dayBase)
	secs := int64(rest / time.Second)
	return cal{months / 12, months % 12, days, int(secs / 3600), int(secs / 60 % 60),
		round9(float64(secs%60) + float64(rest%time.Second)/1e9)}
}

type part struct {
	n    float64
	unit string
}

// human renders non-zero parts: "1 day, 2 hours and 30 minutes".
func human(parts []part) string {
	var words []string
	for _, p := range parts {
		if p.n == 0 {
			continue
		}
		w := fmt.Sprintf("%s %s", trimFloat(p.n), p.unit)
		if p.n != 1 {
			w += "s"
		}
		words = append(words, w)
	}
	switch len(words) {
	case 0:
		return "0 seconds"
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

func trimFloat(f float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.9f", f), "0"), ".")
}

func round6(f float64) float64 { return math.Round(f*1e6) / 1e6 }

// round9 rounds seconds to nanoseconds, dropping float noise.
func round9(f float64) float64 { return math.Round(f*1e9) / 1e9 }

// The result of timezone_convert.
type convertResult struct {
	Result       string `json:"result"`
	Timezone     string `json:"timezone"`
	Abbreviation string `json:"abbreviation"`
	UTCOffset    string `json:"utc_offset"`
	DST          bool   `json:"dst"`
	Weekday      string `json:"weekday"`
	UTC          string `json:"utc"`
	Unix         int64  `json:"unix_seconds"`
	Note         string `json:"note,omitempty"`
}

func convert(datetime, to, from string) (any, *Error) {
	if err := requireAll("datetime", datetime, "to", to); err != nil {
		return nil, err
	}
	src, e := zoneOr("from", from, time.UTC)
	if e != nil {
		return nil, e
	}
	dst, e := zoneOr("to", to, nil)
	if e != nil {
		return nil, e
	}
	in, err := parseInstant("datetime", datetime, src)
	if err != nil {
		return nil, asError(err)
	}
	out := in.t.In(dst)
	abbr, _ := out.Zone()
	r := convertResult{
		Result: out.Format(time.RFC3339Nano), Timezone: zoneName(out), Abbreviation: abbr,
		UTCOffset: out.Format("-07:00"), DST: out.IsDST(), Weekday: out.Weekday().String(),
		UTC: out.UTC().Format(time.RFC3339Nano), Unix: out.Unix(),
	}
	r.Note = in.note
	return r, nil
}
