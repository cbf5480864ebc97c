//! Where plugins' log lines are written from: a process-wide `tracing`
//! layer that sends the name of the thread each line of a plugin (target
//! `plugin`) was logged on to whoever asked for that plugin's lines. The
//! host logs a guest's `log` import on the thread the guest runs on, so this
//! tells which threads run guest code.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use tokio::sync::mpsc;
use tracing::field::{Field, Visit};
use tracing::subscriber::Interest;
use tracing::{Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// One log line of a plugin: its text and the thread it was logged on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub text: String,
    pub thread: String,
}

/// The log lines of plugin `name` from now on (name it uniquely: other tests
/// run at the same time).
pub fn lines_of(name: &str) -> mpsc::UnboundedReceiver<LogLine> {
    let (tx, rx) = mpsc::unbounded_channel();
    capture()
        .wanted
        .lock()
        .unwrap()
        .insert(name.to_string(), tx);
    rx
}

struct Capture {
    wanted: Mutex<HashMap<String, mpsc::UnboundedSender<LogLine>>>,
}

fn capture() -> &'static Capture {
    static CAPTURE: OnceLock<&'static Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        let capture: &'static Capture = Box::leak(Box::new(Capture {
            wanted: Mutex::default(),
        }));
        let subscriber = tracing_subscriber::registry().with(LineLayer(capture));
        tracing::subscriber::set_global_default(subscriber)
            .expect("no other global tracing subscriber in the test binary");
        capture
    })
}

/// The layer: only `plugin` lines interest it.
struct LineLayer(&'static Capture);

fn is_plugin_line(metadata: &Metadata<'_>) -> bool {
    metadata.target() == "plugin" && metadata.is_event()
}

impl<S: Subscriber> Layer<S> for LineLayer {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if is_plugin_line(metadata) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>, _: Context<'_, S>) -> bool {
        is_plugin_line(metadata)
    }

    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let wanted = self.0.wanted.lock().unwrap();
        if let Some(tx) = fields.plugin.and_then(|p| wanted.get(&p)) {
            let thread = std::thread::current();
            let _ = tx.send(LogLine {
                text: fields.message,
                thread: thread.name().unwrap_or("unnamed").to_string(),
            });
        }
    }
}

#[derive(Default)]
struct Fields {
    plugin: Option<String>,
    message: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "plugin" {
            self.plugin = Some(value.to_string());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        }
    }
}
