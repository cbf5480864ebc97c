//! Progress of plugin compilation on stderr, never stdout: a spinner with
//! the plugin's name on a terminal, one line per step otherwise
//! (`compiling calc.wasm ... done in 2.1 s`). A cache hit shows nothing.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::plugin::sandbox::cache::{CompileProgress, CompileStep};

/// The progress observer for this process's stderr (events, when shown,
/// have a stream of their own: `run --events FILE|-`).
pub fn for_stderr() -> Arc<dyn CompileProgress> {
    if std::io::stderr().is_terminal() {
        Arc::new(Spinners)
    } else {
        Arc::new(Lines::default())
    }
}

/// One `indicatif` spinner per compilation.
#[derive(Debug)]
struct Spinners;

impl CompileProgress for Spinners {
    fn start(&self, file: &str) -> Box<dyn CompileStep> {
        let bar = ProgressBar::new_spinner().with_message(format!("compiling {file}"));
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("a valid template"),
        );
        bar.enable_steady_tick(Duration::from_millis(100));
        Box::new(Spinner {
            bar,
            file: file.to_string(),
        })
    }
}

struct Spinner {
    bar: ProgressBar,
    file: String,
}

impl CompileStep for Spinner {
    fn finish(self: Box<Self>, elapsed: Duration, ok: bool) {
        let said = if ok {
            format!("compiled {} in {}", self.file, seconds(elapsed))
        } else {
            format!("compiling {} failed", self.file)
        };
        self.bar
            .set_style(ProgressStyle::with_template("{msg}").expect("a valid template"));
        self.bar.finish_with_message(said);
    }
}

/// `compiling NAME ...` when a step starts, ` done in T` (or ` failed`)
/// on the same line when it ends; a step that ends while another's line
/// is open gets a whole line of its own.
#[derive(Debug, Default)]
struct Lines {
    /// The step whose line is open (written up to `...`).
    open: Arc<Mutex<Option<u64>>>,
    /// The next step's number.
    next: std::sync::atomic::AtomicU64,
}

impl CompileProgress for Lines {
    fn start(&self, file: &str) -> Box<dyn CompileStep> {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut open = self.open.lock().unwrap();
        let mut err = std::io::stderr().lock();
        if open.is_some() {
            let _ = writeln!(err);
        }
        let _ = write!(err, "compiling {file} ...");
        let _ = err.flush();
        *open = Some(id);
        Box::new(Line {
            open: self.open.clone(),
            id,
            file: file.to_string(),
        })
    }
}

struct Line {
    open: Arc<Mutex<Option<u64>>>,
    id: u64,
    file: String,
}

impl CompileStep for Line {
    fn finish(self: Box<Self>, elapsed: Duration, ok: bool) {
        let end = if ok {
            format!("done in {}", seconds(elapsed))
        } else {
            "failed".to_string()
        };
        let mut open = self.open.lock().unwrap();
        let mut err = std::io::stderr().lock();
        if *open == Some(self.id) {
            let _ = writeln!(err, " {end}");
        } else {
            if open.is_some() {
                let _ = writeln!(err);
            }
            let _ = writeln!(err, "compiling {} ... {end}", self.file);
        }
        *open = None;
    }
}

/// `2.1 s`.
fn seconds(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}
