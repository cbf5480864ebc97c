//! What `chat` shows: text as it streams, tool calls and their outcomes,
//! retries, steering, interrupts and how a turn ended. It writes to stdout,
//! or, while the line editor owns the terminal, through its printer.

use std::collections::HashMap;
use std::io::Write;

use super::editor::Printer;
use crate::cli::term::Paint;
use crate::protocol::{
    Event, EventBody, HookDecision, HookError, LlmDelta, LlmResponse, LlmRetry, SteeringInjected,
    SubturnEnd, SubturnSpawn, ToolCallBegin, ToolCallEnd, ToolCallSkipped, TurnEnd, TurnStatus,
};

/// Shown under the text of a model reply that failed and is asked again.
const VOID: &str = "↑ void: that reply failed; the text above is not the answer";

/// Where the screen's text goes.
pub enum Out {
    Stdout,
    Editor(Printer),
}

/// What the terminal shows, and where its cursor is.
pub struct Screen {
    out: Out,
    /// Text not yet written.
    pending: String,
    paint: Paint,
    /// Hook decisions are shown (`-v`).
    hooks_shown: bool,
    /// Labels of the sub-agents started, by id.
    labels: HashMap<String, String>,
    /// A line of streamed text is open.
    mid_line: bool,
    /// The current model call streamed its text (not with --no-stream).
    streamed: bool,
    /// Text of the current attempt is on screen.
    shown: bool,
}

impl Screen {
    pub fn new(out: Out, paint: Paint, hooks_shown: bool) -> Self {
        Screen {
            out,
            pending: String::new(),
            paint,
            hooks_shown,
            labels: HashMap::new(),
            mid_line: false,
            streamed: false,
            shown: false,
        }
    }

    /// The prompt when input is piped (the editor draws its own).
    pub fn prompt(&mut self) {
        self.end_line();
        if matches!(self.out, Out::Stdout) {
            self.put("> ");
        }
        self.flush();
    }

    /// A line was typed: the editor moved the cursor under it.
    pub fn typed(&mut self) {
        if let Out::Editor(printer) = &mut self.out {
            printer.line_typed();
        }
        self.mid_line = false;
    }

    /// The question about a call that waits for approval.
    pub fn ask(&mut self, question: &str) {
        self.end_line();
        self.put(&format!("  {question}"));
        self.flush();
    }

    /// A command's answer, each line indented.
    pub fn reply(&mut self, text: &str) {
        self.end_line();
        for line in text.lines() {
            self.put(&format!("  {line}\n"));
        }
        self.flush();
    }

    pub fn note(&mut self, text: &str) {
        self.end_line();
        let note = self.paint.dim(&format!("[{text}]"));
        self.put(&format!("  {note}\n"));
        self.flush();
    }

    /// Ends the line of streamed text, if one is open.
    pub fn end_line(&mut self) {
        if std::mem::take(&mut self.mid_line) {
            self.put("\n");
        }
    }

    fn put(&mut self, text: &str) {
        self.pending.push_str(text);
    }

    fn flush(&mut self) {
        let text = std::mem::take(&mut self.pending);
        match &mut self.out {
            Out::Stdout => {
                print!("{text}");
                let _ = std::io::stdout().flush();
            }
            Out::Editor(printer) => printer.print(&text),
        }
    }

    /// One event of the session.
    pub fn show(&mut self, event: &Event) {
        if event.parent_turn_id.is_some() {
            // A sub-agent's own work: shown by its start and end.
            return;
        }
        self.event(&event.body);
        self.flush();
    }

    fn event(&mut self, body: &EventBody) {
        let paint = self.paint;
        match body {
            EventBody::SubturnSpawn(SubturnSpawn {
                subturn_id, label, ..
            }) => {
                self.labels.insert(subturn_id.clone(), label.clone());
                self.note(&format!("sub-agent '{label}' started"));
            }
            EventBody::SubturnEnd(SubturnEnd {
                subturn_id, status, ..
            }) => {
                let label = self.labels.remove(subturn_id).unwrap_or_default();
                self.note(&format!("sub-agent '{label}' ended {}", status.as_str()));
            }
            EventBody::LlmRequest(_) => (self.streamed, self.shown) = (false, false),
            EventBody::LlmDelta(LlmDelta { text, .. }) => {
                (self.streamed, self.shown) = (true, true);
                self.put(text);
                self.mid_line = !text.ends_with('\n');
            }
            EventBody::LlmResponse(LlmResponse { text, .. })
                if !self.streamed && !text.is_empty() =>
            {
                self.shown = true;
                self.put(&format!("{text}\n"));
            }
            EventBody::ToolCallBegin(ToolCallBegin {
                tool, arguments, ..
            }) => {
                self.end_line();
                self.put(&format!("  ⚙ {tool} {}\n", clip(arguments, 200)));
            }
            EventBody::ToolCallEnd(ToolCallEnd {
                tool,
                ok,
                output,
                duration_ms,
                ..
            }) => {
                let mark = if *ok {
                    paint.green("✓")
                } else {
                    paint.red("✗")
                };
                let output = clip(output, 300);
                self.put(&format!(
                    "  {mark} {tool} ({duration_ms:.1} ms): {output}\n"
                ));
            }
            EventBody::ToolCallSkipped(ToolCallSkipped { tool, reason, .. }) => {
                self.put(&format!("  - {tool} skipped: {reason}\n"));
            }
            EventBody::SteeringInjected(SteeringInjected { content, .. }) => {
                self.note(&format!("taken in: {}", clip(content, 200)));
            }
            EventBody::HookDecision(HookDecision {
                hook,
                point,
                decision,
                reason,
                ..
            }) if self.hooks_shown => {
                let why = reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default();
                self.note(&format!(
                    "hook '{hook}' ({point}): {}{why}",
                    decision.as_str()
                ));
            }
            EventBody::HookError(HookError {
                hook, point, error, ..
            }) => {
                self.note(&format!(
                    "hook '{hook}' ({point}) failed: {}",
                    clip(error, 200)
                ));
            }
            EventBody::LlmRetry(LlmRetry {
                error,
                next_model,
                delay_ms,
                discard_partial,
                ..
            }) => {
                if *discard_partial && std::mem::take(&mut self.shown) {
                    // A terminal cannot be trusted to erase what scrolled
                    // or wrapped: the void text is marked instead.
                    self.note(VOID);
                }
                self.note(&format!("{error}; trying {next_model} in {delay_ms} ms"));
            }
            EventBody::TurnEnd(TurnEnd { status, reason, .. }) => {
                self.end_line();
                if *status != TurnStatus::Completed {
                    let line = paint.red(&format!("[turn {}: {reason}]", status.as_str()));
                    self.put(&format!("{line}\n"));
                } else if reason == "interrupted" {
                    let line = paint.dim("[turn ended early: interrupted]");
                    self.put(&format!("{line}\n"));
                }
            }
            _ => {}
        }
    }
}

/// The first `max` characters of `text` on one line.
fn clip(text: &str, max: usize) -> String {
    crate::llm::http::snippet(&text.replace('\n', " ⏎ "), max)
}
