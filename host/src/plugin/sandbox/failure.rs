//! Why a call stopped, in plain words: which limit it broke (its time, its
//! memory, its log lines, its resource table), that the host was busy, or how
//! the guest crashed and what it last wrote to stderr.

use super::limits::{Breach, MAX_RESOURCES};
use super::state::PluginState;
use crate::plugin::error::wasm_error_chain;
use crate::plugin::policy::grants::Limits;
use crate::plugin::units::{duration, size};

/// Says in plain words why a call into `plugin` stopped.
pub fn describe_failure(
    plugin: &str,
    state: &PluginState,
    limits: &Limits,
    error: &wasmtime::Error,
) -> String {
    if is_pool_exhausted(error) {
        return format!(
            "plugin '{plugin}' could not start: the host is running as many plugin instances as it allows; try again shortly"
        );
    }
    match state.breach() {
        Some(Breach::Deadline) if state.deadline.from_turn => format!(
            "plugin '{plugin}' did not finish before its turn's deadline ({}) and was stopped",
            duration(state.deadline.timeout)
        ),
        Some(Breach::Deadline) => format!(
            "plugin '{plugin}' did not finish within its time limit of {} and was stopped",
            duration(state.deadline.timeout)
        ),
        Some(Breach::Memory) if state.memory().host_breached() => format!(
            "plugin '{plugin}' exceeded its memory limit of {} with what the host holds for it ({} of HTTP header objects, bodies and answers) and was stopped",
            size(limits.memory_bytes),
            size(state.memory().host_bytes())
        ),
        Some(Breach::Memory) => format!(
            "plugin '{plugin}' exceeded its memory limit of {} and was stopped",
            size(limits.memory_bytes)
        ),
        None if table_full(error) => format!(
            "plugin '{plugin}' held more than {MAX_RESOURCES} host resources at once (open files, streams, HTTP objects), its limit, and was stopped"
        ),
        Some(Breach::LogLines) => format!(
            "plugin '{plugin}' exceeded its limit of {} log lines per call and was stopped",
            limits.log_lines
        ),
        None => {
            let reason = match error.downcast_ref::<wasmtime::Trap>() {
                Some(trap) => trap
                    .to_string()
                    .trim_start_matches("wasm trap: ")
                    .to_string(),
                None => wasm_error_chain(error),
            };
            crash_report(plugin, &reason, &state.log.stderr_tail())
        }
    }
}

/// Longest part of the guest's stderr quoted in a crash report (its end).
const QUOTED_STDERR: usize = 2048;

/// `plugin` crashed with `reason`: what its language runtime said, when
/// that can be read off its last stderr lines (a Python exception, a
/// JavaScript value thrown that is not an error of the WIT), and those
/// lines, less the blank ones and the Rust panic's backtrace hint.
fn crash_report(plugin: &str, reason: &str, tail: &[String]) -> String {
    let lines: Vec<&str> = (tail.iter())
        .map(|l| l.trim_end())
        .filter(|l| !l.is_empty() && !l.starts_with("note: run with `RUST_BACKTRACE=1`"))
        .collect();
    let what = match runtime_said(&lines) {
        Some(said) => format!("plugin '{plugin}' crashed: {said}"),
        None => format!("plugin '{plugin}' crashed ({reason})"),
    };
    if lines.is_empty() {
        return what;
    }
    let quoted = (lines.iter().map(|l| l.trim_start()))
        .collect::<Vec<_>>()
        .join(" / ");
    let start = quoted.ceil_char_boundary(quoted.len().saturating_sub(QUOTED_STDERR));
    let cut = if start > 0 { "..." } else { "" };
    format!("{what}; its stderr ended with: {cut}{}", &quoted[start..])
}

/// The exception a guest's language runtime reported on its way down.
fn runtime_said(lines: &[&str]) -> Option<String> {
    // componentize-py prints the traceback, then panics: the exception is
    // the traceback's last line that is not indented.
    let traceback = |l: &&str| l.starts_with("Traceback (most recent call last)");
    if let Some(start) = lines.iter().rposition(traceback) {
        let exception = (lines[start + 1..].iter())
            .take_while(|l| !l.starts_with("thread '"))
            .filter(|l| !l.starts_with(char::is_whitespace))
            .last()?;
        return Some(format!("Python raised {exception}"));
    }
    // componentize-js takes whatever `callTool` throws for the error of the
    // WIT result; an `Error` is not one.
    if lines
        .iter()
        .any(|l| l.contains("is not one of the cases of error-kind"))
    {
        return Some(
            "JavaScript threw a value that is not a plugin-error (catch exceptions in the exported function and throw {kind, message, retryable}, as the template does)"
                .to_string(),
        );
    }
    None
}

/// Whether the call's resource table was full.
fn table_full(error: &wasmtime::Error) -> bool {
    error.chain().any(|c| {
        matches!(
            c.downcast_ref::<wasmtime::component::ResourceTableError>(),
            Some(wasmtime::component::ResourceTableError::Full)
        )
    })
}

/// Whether instantiation failed because the instance pool is full: the
/// host is busy, the plugin is fine.
pub fn is_pool_exhausted(error: &wasmtime::Error) -> bool {
    error
        .chain()
        .any(|c| c.is::<wasmtime::PoolConcurrencyLimitError>())
}

#[cfg(test)]
mod tests {
    use super::crash_report;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(String::from).collect()
    }

    #[test]
    fn a_python_exception_is_named_with_its_traceback() {
        // What componentize-py 0.25 prints when `call_tool` raises.
        let tail = lines(
            "Traceback (most recent call last):\n  File \"/0/app.py\", line 60, in call_tool\nKeyError: 'x'\n\nthread '<unnamed>' (1) panicked at runtime/src/lib.rs:1293:29:\nPython function threw an unexpected exception\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace",
        );
        assert_eq!(
            crash_report("p", "wasm `unreachable` instruction executed", &tail),
            "plugin 'p' crashed: Python raised KeyError: 'x'; its stderr ended with: Traceback (most recent call last): / File \"/0/app.py\", line 60, in call_tool / KeyError: 'x' / thread '<unnamed>' (1) panicked at runtime/src/lib.rs:1293:29: / Python function threw an unexpected exception"
        );
    }

    #[test]
    fn a_javascript_value_that_is_no_plugin_error_says_what_to_throw() {
        // What componentize-js prints when `callTool` throws an `Error`.
        let tail = lines(
            "\"undefined\" is not one of the cases of error-kind\nStack:\n  export_tool_0_2_0$callTool@/tmp/x/sources/initializer.js:467:17\n\nRedirecting call to abort() to mozalloc_abort\n",
        );
        let report = crash_report("p", "wasm `unreachable` instruction executed", &tail);
        assert!(
            report.starts_with(
                "plugin 'p' crashed: JavaScript threw a value that is not a plugin-error (catch exceptions"
            ),
            "{report}"
        );
        assert!(
            report.ends_with("; its stderr ended with: \"undefined\" is not one of the cases of error-kind / Stack: / export_tool_0_2_0$callTool@/tmp/x/sources/initializer.js:467:17 / Redirecting call to abort() to mozalloc_abort"),
            "{report}"
        );
    }

    #[test]
    fn other_crashes_give_the_trap_and_the_end_of_a_long_stderr() {
        assert_eq!(
            crash_report("p", "wasm `unreachable` instruction executed", &[]),
            "plugin 'p' crashed (wasm `unreachable` instruction executed)"
        );
        let tail = vec!["é".repeat(1500), "last words".to_string()];
        let report = crash_report("p", "out of bounds", &tail);
        let quoted = report
            .strip_prefix("plugin 'p' crashed (out of bounds); its stderr ended with: ...")
            .unwrap();
        assert!(quoted.ends_with("é / last words"), "{report}");
        assert!(quoted.len() <= super::QUOTED_STDERR + 1, "{}", quoted.len());
    }
}
