package dates

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// call runs a tool and decodes its JSON result.
func call(t *testing.T, name, args string) map[string]any {
	t.Helper()
	out, err := Call(name, args)
	if err != nil {
		t.Fatalf("%s %s: %v", name, args, err)
	}
	var v map[string]any
	if jerr := json.Unmarshal([]byte(out), &v); jerr != nil {
		t.Fatalf("%s: result is not JSON: %v\n%s", name, jerr, out)
	}
	return v
}

// fail runs a tool that must fail with invalid-input and returns the message.
func fail(t *testing.T, name, args string, want ...string) {
	t.Helper()
	_, err := Call(name, args)
	if err == nil {
		t.Fatalf("%s %s: succeeded, want an error", name, args)
	}
	if err.Kind != InvalidInput {
		t.Fatalf("%s %s: kind %v, want InvalidInput (%s)", name, args, err.Kind, err.Message)
	}
	for _, w := range want {
		if !strings.Contains(err.Message, w) {
			t.Errorf("%s %s: message %q lacks %q", name, args, err.Message, w)
		}
	}
}

func expect(t *testing.T, got map[string]any, field string, want any) {
	t.Helper()
	if g := got[field]; g != want {
		t.Errorf("%s = %#v, want %#v (all: %v)", field, g, want, got)
	}
}

func TestSpecsAreValidSchemas(t *testing.T) {
	names := map[string]bool{}
	for _, s := range Specs() {
		var v map[string]any
		if err := json.Unmarshal([]byte(s.InputSchema), &v); err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if v["type"] != "object" || v["additionalProperties"] != false || v["required"] == nil {
			t.Errorf("%s: schema %s", s.Name, s.InputSchema)
		}
		names[s.Name] = true
	}
	for _, n := range []string{"datetime_add", "datetime_diff", "timezone_convert", "business_days"} {
		if !names[n] {
			t.Errorf("missing tool %s", n)
		}
	}
}

func TestAddCalendarUnitsAcrossDST(t *testing.T) {
	// New York springs forward on 2024-03-10: one day later is still 12:00
	// on the wall clock, 23 hours later.
	v := call(t, "datetime_add", `{"datetime":"2024-03-09T12:00:00","duration":"1d","timezone":"America/New_York"}`)
	expect(t, v, "result", "2024-03-10T12:00:00-04:00")
	expect(t, v, "weekday", "Sunday")
	expect(t, v, "timezone", "America/New_York")
	v = call(t, "datetime_add", `{"datetime":"2024-03-09T12:00:00-05:00","duration":"24h","timezone":"America/New_York"}`)
	expect(t, v, "result", "2024-03-10T13:00:00-04:00")
	// 02:30 does not exist on 2024-03-10: moved forward to 03:30.
	v = call(t, "datetime_add", `{"datetime":"2024-03-09T02:30:00","duration":"P1D","timezone":"America/New_York"}`)
	expect(t, v, "result", "2024-03-10T03:30:00-04:00")
	v = call(t, "datetime_add", `{"datetime":"2024-03-09T12:00:00","duration":"-1mo","timezone":"America/New_York"}`)
	expect(t, v, "result", "2024-02-09T12:00:00-05:00")
}

func TestAddFormats(t *testing.T) {
	cases := []struct{ start, dur, want string }{
		{"2024-01-31", "1mo", "2024-02-29"},
		{"2023-01-31", "P1M", "2023-02-28"},
		{"2024-02-29", "1y", "2025-02-28"},
		{"2024-01-01", "P1Y2M3D", "2025-03-04"},
		{"2024-01-01", "2w 3d", "2024-01-18"},
		{"2024-01-01", "-1d", "2023-12-31"},
		{"2024-01-01", "-P1M", "2023-12-01"},
		{"2024-01-01", "36h", "2024-01-02T12:00:00Z"},
		{"2024-01-01T10:00:00Z", "1h30m", "2024-01-01T11:30:00Z"},
		{"2024-01-01T10:00:00Z", "1.5h", "2024-01-01T11:30:00Z"},
		{"2024-01-01T10:00:00Z", "-90m", "2024-01-01T08:30:00Z"},
		{"2024-01-01T10:00:00Z", "PT45M", "2024-01-01T10:45:00Z"},
		{"2024-01-01T10:00:00Z", "P3DT4H", "2024-01-04T14:00:00Z"},
		{"2024-01-01T10:00:00Z", "pt0.5s", "2024-01-01T10:00:00.5Z"},
		{"2024-01-31T10:00:00-08:00", "P1DT4H", "2024-02-01T14:00:00-08:00"},
		{"2024-01-01 10:00", "1 day 2 hours", "2024-01-02T12:00:00Z"},
		{"2024-01-01T10:00:00Z", "250ms", "2024-01-01T10:00:00.25Z"},
		{"2024-01-01T10:00:00Z", "PT1,5S", "2024-01-01T10:00:01.5Z"},
		{"2024-01-01T10:00:00Z", "10µs", "2024-01-01T10:00:00.00001Z"},
		{"2024-01-01", "p1w", "2024-01-08"},
		{"2024-01-01", "- 2 weeks", "2023-12-18"},
		{"2024-01-01", "1Y 1MO", "2025-02-01"},
	}
	for _, c := range cases {
		v := call(t, "datetime_add", `{"datetime":"`+c.start+`","duration":"`+c.dur+`"}`)
		if v["result"] != c.want {
			t.Errorf("%s + %s = %v, want %s", c.start, c.dur, v["result"], c.want)
		}
	}
	v := call(t, "datetime_add", `{"datetime":"2024-01-31","duration":"1mo"}`)
	expect(t, v, "note", "the day did not exist in the target month, so the month's last day was used")
}

func TestAddErrorsNameTheArgument(t *testing.T) {
	fail(t, "datetime_add", `{"datetime":"2024-02-30","duration":"1d"}`, `argument "datetime"`, "day out of range", "RFC 3339")
	fail(t, "datetime_add", `{"datetime":"tomorrow","duration":"1d"}`, `argument "datetime"`, `"tomorrow" is not a date/time`)
	fail(t, "datetime_add", `{"datetime":"2024-01-01","duration":"3 fortnights"}`, `argument "duration"`, `unknown unit "fortnights"`, "ISO 8601")
	fail(t, "datetime_add", `{"datetime":"2024-01-01","duration":"1.5mo"}`, "whole numbers")
	fail(t, "datetime_add", `{"datetime":"2024-01-01","duration":"P"}`, `argument "duration"`)
	fail(t, "datetime_add", `{"datetime":"2024-01-01","duration":"1d1d"}`, "twice")
	fail(t, "datetime_add", `{"datetime":"2024-01-01","duration":"PT"}`, `nothing follows "T"`)
	fail(t, "datetime_add", `{"datetime":"2024-01-01","duration":"P1H"}`, "out of place")
	fail(t, "datetime_add", `{"datetime":"2024-01-01","duration":"P1D2Y"}`, "out of place")
	fail(t, "datetime_add", `{"datetime":"2024-01-01","duration":"P1.5D"}`, "only seconds")
	fail(t, "datetime_add", `{"datetime":"2024-01-01","duration":"1h30"}`, "needs a unit")
	fail(t, "datetime_add", `{"datetime":"2024-01-01","duration":"h"}`, "expected a number")
	fail(t, "datetime_add", `{"datetime":"2024-01-01","duration":"-"}`, "empty")
	fail(t, "datetime_add", `{"datetime":"2024-01-01","duration":"99999999999y"}`, "too large")
	fail(t, "datetime_add", `{"datetime":"2024-01-01","duration":"9000y"}`, "years 1 to 9999")
	fail(t, "datetime_add", `{"datetime":"2024-01-01","duration":"1d","timezone":"Mars/Olympus"}`, `argument "timezone"`, `unknown time zone "Mars/Olympus"`, "IANA")
	fail(t, "datetime_add", `{"datetime":"2024-01-01"}`, `argument "duration" is required`)
	fail(t, "datetime_add", `{"datetime":"2024-01-01","duration":"1d","extra":1}`, "unknown field")
	fail(t, "datetime_add", `not json`, "arguments")
}

func TestDiff(t *testing.T) {
	v := call(t, "datetime_diff", `{"from":"2024-01-01T00:00:00Z","to":"2024-03-04T05:06:07Z"}`)
	expect(t, v, "total_seconds", 5461567.0)
	expect(t, v, "direction", "to is after from")
	expect(t, v, "human", "63 days, 5 hours, 6 minutes and 7 seconds")
	expect(t, v, "calendar_human", "2 months, 3 days, 5 hours, 6 minutes and 7 seconds")
	exact := v["exact"].(map[string]any)
	if exact["days"] != 63.0 || exact["seconds"] != 7.0 {
		t.Errorf("exact = %v", exact)
	}

	v = call(t, "datetime_diff", `{"from":"2024-03-01","to":"2024-02-28"}`)
	expect(t, v, "total_days", -2.0)
	expect(t, v, "direction", "to is before from")
	expect(t, v, "human", "2 days")

	v = call(t, "datetime_diff", `{"from":"2024-01-31","to":"2024-03-01"}`)
	expect(t, v, "calendar_human", "1 month and 1 day")

	// Across the DST change: 23 real hours, one calendar day.
	v = call(t, "datetime_diff", `{"from":"2024-03-09T12:00:00","to":"2024-03-10T12:00:00","timezone":"America/New_York"}`)
	expect(t, v, "total_hours", 23.0)
	expect(t, v, "calendar_human", "1 day")

	v = call(t, "datetime_diff", `{"from":"2024-01-01T00:00:00Z","to":"2024-01-01T00:00:00.25Z"}`)
	expect(t, v, "total_seconds", 0.25)
	expect(t, v, "human", "0.25 seconds")

	v = call(t, "datetime_diff", `{"from":"0001-01-01","to":"9999-12-31"}`)
	expect(t, v, "calendar_human", "9998 years, 11 months and 30 days")
	v = call(t, "datetime_diff", `{"from":"9999-12-31T23:59:59.999999999Z","to":"0001-01-01"}`)
	expect(t, v, "human", "3652058 days, 23 hours, 59 minutes and 59.999999999 seconds")
	expect(t, v, "calendar_human", "9998 years, 11 months, 30 days, 23 hours, 59 minutes and 59.999999999 seconds")
	v = call(t, "datetime_diff", `{"from":"2024-01-01T00:00:01Z","to":"2024-01-01T00:00:00.5Z"}`)
	expect(t, v, "total_seconds", -0.5)
	expect(t, v, "human", "0.5 seconds")

	fail(t, "datetime_diff", `{"from":"2024-13-01","to":"now"}`, `argument "from"`, "month out of range")
}

func TestConvert(t *testing.T) {
	v := call(t, "timezone_convert", `{"datetime":"2024-03-10T14:30:00Z","to":"Asia/Tokyo"}`)
	expect(t, v, "result", "2024-03-10T23:30:00+09:00")
	expect(t, v, "abbreviation", "JST")
	expect(t, v, "utc_offset", "+09:00")
	expect(t, v, "dst", false)

	v = call(t, "timezone_convert", `{"datetime":"2024-07-01T09:00:00","from":"Europe/Paris","to":"America/Los_Angeles"}`)
	expect(t, v, "result", "2024-07-01T00:00:00-07:00")
	expect(t, v, "abbreviation", "PDT")
	expect(t, v, "dst", true)
	expect(t, v, "utc", "2024-07-01T07:00:00Z")

	v = call(t, "timezone_convert", `{"datetime":"2024-01-01T12:00:00Z","to":"+05:30"}`)
	expect(t, v, "result", "2024-01-01T17:30:00+05:30")
	expect(t, v, "timezone", "+05:30")

	// 02:30 does not exist in New York on 2024-03-10; 01:30 happens twice on 2024-11-03.
	v = call(t, "timezone_convert", `{"datetime":"2024-03-10T02:30:00","from":"America/New_York","to":"UTC"}`)
	expect(t, v, "result", "2024-03-10T07:30:00Z") // moved forward to 03:30 EDT
	if n, _ := v["note"].(string); !strings.Contains(n, "does not exist") {
		t.Errorf("gap note: %v", v)
	}
	v = call(t, "timezone_convert", `{"datetime":"2024-11-03T01:30:00","from":"America/New_York","to":"UTC"}`)
	if n, _ := v["note"].(string); !strings.Contains(n, "happens twice") {
		t.Errorf("overlap note: %v", v)
	}

	fail(t, "timezone_convert", `{"datetime":"2024-01-01T00:00:00Z","to":"Local"}`, `argument "to"`)
	fail(t, "timezone_convert", `{"datetime":"2024-01-01T00:00:00Z","to":"europe/paris"}`, `argument "to"`, "case-sensitive")
	fail(t, "timezone_convert", `{"datetime":"2024-01-01T00:00:00Z","to":"+19:00"}`, "out of range")
}

func TestBusinessDays(t *testing.T) {
	v := call(t, "business_days", `{"start":"2024-12-23","end":"2025-01-03","holidays":["2024-12-25","2025-01-01"]}`)
	expect(t, v, "business_days", 8.0)
	expect(t, v, "calendar_days", 12.0)
	expect(t, v, "weekend_days", 2.0)
	expect(t, v, "holidays", 2.0)

	v = call(t, "business_days", `{"start":"2024-05-31","days":1}`) // Friday + 1 = Monday
	expect(t, v, "result", "2024-06-03")
	expect(t, v, "weekday", "Monday")
	v = call(t, "business_days", `{"start":"2024-06-03","days":-1}`)
	expect(t, v, "result", "2024-05-31")
	v = call(t, "business_days", `{"start":"2024-05-30","days":1,"weekend":["Friday","Saturday"]}`)
	expect(t, v, "result", "2024-06-02")

	fail(t, "business_days", `{"start":"2024-01-01"}`, `"end" and "days"`)
	fail(t, "business_days", `{"start":"2024-01-01","end":"2023-01-01"}`, `argument "end"`, "before start")
	fail(t, "business_days", `{"start":"2024-01-01T10:00:00Z","days":3}`, `argument "start"`, "time of day")
	fail(t, "business_days", `{"start":"2024-01-01","days":3,"holidays":["2024-01-02","xmas"]}`, `argument "holidays" item 1`)
	fail(t, "business_days", `{"start":"2024-01-01","end":"2200-01-01"}`, "at most")
}

func TestUnknownTool(t *testing.T) {
	_, err := Call("later", `{}`)
	if err == nil || err.Kind != NotFound {
		t.Fatalf("err = %v", err)
	}
}

func TestNowUsesTheClock(t *testing.T) {
	clock = func() time.Time { return time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC) }
	defer func() { clock = time.Now }()
	v := call(t, "datetime_add", `{"datetime":"now","duration":"1h","timezone":"Europe/Berlin"}`)
	expect(t, v, "result", "2024-06-01T15:00:00+02:00")
	v = call(t, "datetime_diff", `{"from":"today","to":"now"}`)
	expect(t, v, "total_hours", 12.0)
}
