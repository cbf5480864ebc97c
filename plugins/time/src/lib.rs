//! wasmclaw tool plugin `time`: the current time, differences between dates
//! and date arithmetic, so the model does not guess what day it is or count
//! days by hand. Works with fixed UTC offsets; it has no time zone database.

pub mod calendar;

// Rust bindings for the `tool-plugin` world, and the component-ABI glue that
// routes the exported functions to `Time`. The glue is generated unsafe code;
// everything written by hand stays safe. It is exported only when building
// the component, so that host-side unit tests link.
#[allow(unsafe_code)]
mod bindings {
    wit_bindgen::generate!({
        world: "tool-plugin",
        path: "../../wit",
    });

    #[cfg(target_arch = "wasm32")]
    use super::Time;
    #[cfg(target_arch = "wasm32")]
    export!(Time);
}

use bindings::exports::wasmclaw::plugin::tool::Guest;
#[cfg(target_arch = "wasm32")]
use bindings::wasmclaw::plugin::log::{Level, log};
use bindings::wasmclaw::plugin::types::{CallContext, ErrorKind, PluginError, ToolSpec};
use calendar::{DateTime, WEEKDAYS};
use serde_json::{Value, json};

struct Time;

const DATE_FORMATS: &str = "YYYY-MM-DD, RFC 3339 like 2024-05-01T13:45:00+02:00 \
    (without an offset the time is UTC), or \"now\" / \"today\" (UTC)";

impl Guest for Time {
    fn list_tools() -> Vec<ToolSpec> {
        vec![
            tool(
                "now",
                "Get the current date and time: RFC 3339 timestamp, Unix seconds, weekday, \
                 day of the year and ISO week, in UTC or a given fixed UTC offset.",
                json!({
                    "type": "object",
                    "properties": {
                        "utc_offset": {
                            "type": "string",
                            "description": "Fixed offset from UTC to show the time in, \
                                e.g. \"+05:30\", \"-08:00\" or \"Z\" (default). Time zone \
                                names are not supported; use the zone's current offset.",
                            "maxLength": 16
                        }
                    },
                    "required": [],
                    "additionalProperties": false
                }),
            ),
            tool(
                "date_diff",
                "Compute the time between two dates or timestamps: exact totals in \
                 seconds, minutes, hours and days (negative when `to` is before `from`), \
                 a days/hours/minutes/seconds breakdown, and a calendar reading in years, \
                 months and days (e.g. for ages).",
                json!({
                    "type": "object",
                    "properties": {
                        "from": {
                            "type": "string",
                            "description": format!("Start: {DATE_FORMATS}."),
                            "maxLength": 64
                        },
                        "to": {
                            "type": "string",
                            "description": format!("End: {DATE_FORMATS}."),
                            "maxLength": 64
                        }
                    },
                    "required": ["from", "to"],
                    "additionalProperties": false
                }),
            ),
            tool(
                "date_add",
                "Add a duration to a date or timestamp (subtract with a leading '-'). \
                 Years and months are calendar units (Jan 31 + 1 month = Feb 28 or 29); \
                 weeks, days, hours, minutes and seconds are exact. Returns a date for a \
                 date plus whole days, otherwise an RFC 3339 timestamp in the input's offset.",
                json!({
                    "type": "object",
                    "properties": {
                        "date": {
                            "type": "string",
                            "description": format!("Starting point: {DATE_FORMATS}."),
                            "maxLength": 64
                        },
                        "duration": {
                            "type": "string",
                            "description": "Amount to add: compact like \"3d4h30m\", \
                                \"1y 2mo\", \"2w\", \"-90m\", \"1.5h\" (units y, mo, w, d, h, \
                                m, s, ms or their English names) or ISO 8601 like \"P3DT4H\", \
                                \"P1Y2M\", \"-P1W\".",
                            "minLength": 1,
                            "maxLength": 200
                        }
                    },
                    "required": ["date", "duration"],
                    "additionalProperties": false
                }),
            ),
        ]
    }

    fn call_tool(
        _ctx: CallContext,
        name: String,
        arguments: String,
    ) -> Result<String, PluginError> {
        let args: Value = serde_json::from_str(&arguments)
            .map_err(|e| invalid(format!("arguments are not JSON: {e}")))?;
        debug(&format!("{name}: {} bytes of arguments", arguments.len()));
        let result = match name.as_str() {
            "now" => now(&args)?,
            "date_diff" => date_diff(&args)?,
            "date_add" => date_add(&args)?,
            _ => {
                return Err(PluginError {
                    kind: ErrorKind::NotFound,
                    message: format!("no tool named '{name}'"),
                    retryable: false,
                });
            }
        };
        serde_json::to_string_pretty(&result)
            .map_err(|e| internal(format!("could not encode the result: {e}")))
    }
}

fn now(args: &Value) -> Result<Value, PluginError> {
    let offset = match args.get("utc_offset").and_then(Value::as_str) {
        Some(s) => calendar::parse_offset(s).map_err(invalid)?,
        None => 0,
    };
    let t = DateTime {
        secs: unix_now()?,
        nanos: 0,
        offset,
        date_only: false,
    };
    let c = t.civil();
    let (week_year, week) = calendar::iso_week(c.days);
    Ok(json!({
        "rfc3339": t.rfc3339(),
        "unix_seconds": t.secs,
        "date": t.date_string(),
        "time": format!("{:02}:{:02}:{:02}", c.time / 3600, c.time / 60 % 60, c.time % 60),
        "weekday": WEEKDAYS[calendar::weekday(c.days)],
        "day_of_year": c.days - calendar::days_from_civil(c.year, 1, 1) + 1,
        "iso_week": format!("{week_year}-W{week:02}"),
        "utc_offset": calendar::format_offset(offset, false),
    }))
}

fn date_diff(args: &Value) -> Result<Value, PluginError> {
    let now = unix_now()?;
    let from = parse_date(args, "from", now)?;
    let to = parse_date(args, "to", now)?;
    let ns = calendar::diff_nanos(&from, &to);
    let (days, hours, minutes, seconds) = calendar::split(ns.abs());
    let (early, late) = if ns < 0 { (&to, &from) } else { (&from, &to) };
    let (months, rest) = calendar::calendar_diff(early, late);
    let (c_days, c_hours, c_minutes, c_seconds) = calendar::split(rest);
    let total_secs = ns as f64 / 1e9;
    Ok(json!({
        "from": from.rfc3339(),
        "to": to.rfc3339(),
        "direction": match ns {
            0 => "same instant",
            n if n > 0 => "to is after from",
            _ => "to is before from",
        },
        "total_seconds": number(total_secs),
        "total_minutes": number(total_secs / 60.0),
        "total_hours": number(total_secs / 3600.0),
        "total_days": number(total_secs / 86_400.0),
        "duration": {
            "days": days,
            "hours": hours,
            "minutes": minutes,
            "seconds": number(seconds),
        },
        "human": calendar::human(&[
            (days as f64, "day"),
            (hours as f64, "hour"),
            (minutes as f64, "minute"),
            (seconds, "second"),
        ]),
        "calendar": calendar::human(&[
            ((months / 12) as f64, "year"),
            ((months % 12) as f64, "month"),
            (c_days as f64, "day"),
            (c_hours as f64, "hour"),
            (c_minutes as f64, "minute"),
            (c_seconds, "second"),
        ]),
    }))
}

fn date_add(args: &Value) -> Result<Value, PluginError> {
    let start = parse_date(args, "date", unix_now()?)?;
    let duration = calendar::parse_duration(string(args, "duration")?).map_err(invalid)?;
    let out = calendar::add(start, duration).map_err(invalid)?;
    let whole_days = duration.nanos % (i128::from(calendar::DAY) * 1_000_000_000) == 0;
    let result = if start.date_only && whole_days {
        out.date_string()
    } else {
        out.rfc3339()
    };
    Ok(json!({
        "result": result,
        "weekday": WEEKDAYS[calendar::weekday(out.civil().days)],
        "unix_seconds": out.secs,
    }))
}

fn parse_date(args: &Value, key: &str, now: i64) -> Result<DateTime, PluginError> {
    calendar::parse_datetime(string(args, key)?, now).map_err(|e| invalid(format!("'{key}': {e}")))
}

fn string<'a>(args: &'a Value, key: &str) -> Result<&'a str, PluginError> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(format!("'{key}' (a string) is required")))
}

fn unix_now() -> Result<i64, PluginError> {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| internal("the clock is before 1970"))?;
    i64::try_from(since.as_secs()).map_err(|_| internal("the clock is out of range"))
}

/// An integer when whole, otherwise rounded to 6 decimal places.
fn number(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9e15 {
        json!(x as i64)
    } else {
        json!((x * 1e6).round() / 1e6)
    }
}

fn tool(name: &str, description: &str, schema: Value) -> ToolSpec {
    ToolSpec {
        name: name.to_string(),
        description: description.to_string(),
        input_schema: schema.to_string(),
    }
}

fn invalid(message: impl Into<String>) -> PluginError {
    PluginError {
        kind: ErrorKind::InvalidInput,
        message: message.into(),
        retryable: false,
    }
}

fn internal(message: impl Into<String>) -> PluginError {
    PluginError {
        kind: ErrorKind::Internal,
        message: message.into(),
        retryable: false,
    }
}

/// Logs one line through the host's `log` import. Host-side unit tests have
/// no host to log to, so there it does nothing.
fn debug(message: &str) {
    #[cfg(target_arch = "wasm32")]
    log(Level::Debug, message);
    #[cfg(not(target_arch = "wasm32"))]
    let _ = message;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, arguments: Value) -> Result<Value, PluginError> {
        let ctx = CallContext {
            session_key: "s".into(),
            turn_id: "t".into(),
            parent_turn_id: None,
            depth: 0,
            call_id: "c".into(),
            deadline_ms: 0,
        };
        Time::call_tool(ctx, name.into(), arguments.to_string())
            .map(|s| serde_json::from_str(&s).unwrap())
    }

    #[test]
    fn schemas_are_closed_objects() {
        let tools = Time::list_tools();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["now", "date_diff", "date_add"]);
        for t in &tools {
            let schema: Value = serde_json::from_str(&t.input_schema).unwrap();
            assert_eq!(schema["type"], "object");
            assert_eq!(schema["additionalProperties"], false);
        }
    }

    #[test]
    fn now_in_an_offset() {
        let v = call("now", json!({"utc_offset": "+05:30"})).unwrap();
        assert!(v["rfc3339"].as_str().unwrap().ends_with("+05:30"));
        assert!(v["unix_seconds"].as_i64().unwrap() > 1_600_000_000);
        assert!(WEEKDAYS.contains(&v["weekday"].as_str().unwrap()));
        let e = call("now", json!({"utc_offset": "IST"})).unwrap_err();
        assert!(matches!(e.kind, ErrorKind::InvalidInput));
    }

    #[test]
    fn diff() {
        let v = call(
            "date_diff",
            json!({"from": "2024-01-01", "to": "2024-03-04T05:06:07Z"}),
        )
        .unwrap();
        assert_eq!(v["total_seconds"], 5_461_567);
        assert_eq!(
            v["duration"],
            json!({"days": 63, "hours": 5, "minutes": 6, "seconds": 7})
        );
        assert_eq!(v["human"], "63 days, 5 hours, 6 minutes and 7 seconds");
        assert_eq!(
            v["calendar"],
            "2 months, 3 days, 5 hours, 6 minutes and 7 seconds"
        );
        let v = call(
            "date_diff",
            json!({"from": "2024-03-01", "to": "2024-02-28"}),
        )
        .unwrap();
        assert_eq!(v["total_days"], -2);
        assert_eq!(v["direction"], "to is before from");
        assert_eq!(v["human"], "2 days");
        let e = call("date_diff", json!({"from": "2024-02-30", "to": "now"})).unwrap_err();
        assert!(
            e.message.starts_with("'from': invalid date"),
            "{}",
            e.message
        );
    }

    #[test]
    fn add() {
        let v = call("date_add", json!({"date": "2024-01-31", "duration": "1mo"})).unwrap();
        assert_eq!(v["result"], "2024-02-29");
        assert_eq!(v["weekday"], "Thursday");
        let v = call(
            "date_add",
            json!({"date": "2024-01-31T10:00:00-08:00", "duration": "P1DT4H"}),
        )
        .unwrap();
        assert_eq!(v["result"], "2024-02-01T14:00:00-08:00");
        let v = call("date_add", json!({"date": "2024-01-01", "duration": "36h"})).unwrap();
        assert_eq!(v["result"], "2024-01-02T12:00:00Z");
        let e = call(
            "date_add",
            json!({"date": "2024-01-01", "duration": "3 fortnights"}),
        )
        .unwrap_err();
        assert!(e.message.contains("unknown unit 'fortnights'"));
    }

    #[test]
    fn unknown_tool() {
        let e = call("later", json!({})).unwrap_err();
        assert!(matches!(e.kind, ErrorKind::NotFound));
    }
}
