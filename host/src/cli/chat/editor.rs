//! `chat`'s line editor on a terminal: rustyline on a thread of its own,
//! asked for one line at a time, with its history in a file.
//!
//! The editor reads only when asked ([`LineEditor::read`]), so the terminal
//! is in raw mode only while a line is being typed, and is left as it was
//! when the chat ends between reads. While it reads, the chat prints through
//! [`Printer`]: rustyline writes the text above the line being edited and
//! draws the prompt and the line again under it. In raw mode Ctrl-C is a key,
//! not a signal: it comes back as [`Input::Interrupted`].

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::{Context, Result};
use rustyline::error::ReadlineError;
use rustyline::history::FileHistory;
use rustyline::{Config, Editor, ExternalPrinter};
use unicode_width::UnicodeWidthChar;

/// Most lines the history file keeps.
pub const HISTORY_LINES: usize = 1000;

/// What the person typed.
#[derive(Debug, PartialEq, Eq)]
pub enum Input {
    Line(String),
    /// Ctrl-C.
    Interrupted,
    /// Ctrl-D on an empty line: input ends.
    Eof,
}

enum Request {
    Read(String),
    Remember(String),
}

/// The editor's thread, asked for lines.
pub struct LineEditor {
    requests: std::sync::mpsc::Sender<Request>,
    inputs: tokio::sync::mpsc::UnboundedReceiver<Result<Input>>,
    /// A line is asked for and not yet given.
    reading: bool,
    /// The terminal's mode before the editor, put back at the end.
    _mode: TerminalMode,
}

impl LineEditor {
    /// An editor when stdin and stdout are both terminals (None otherwise),
    /// with the history of `history` (created on the first line kept).
    pub fn start(history: PathBuf) -> Result<Option<(LineEditor, Printer)>> {
        if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
            return Ok(None);
        }
        let config = Config::builder()
            .max_history_size(HISTORY_LINES)
            .context("the history size")?
            .auto_add_history(false)
            .build();
        let mut editor: Editor<(), FileHistory> =
            Editor::with_config(config).context("starting the line editor")?;
        // A history that does not read is not worth losing the chat over.
        if history.exists()
            && let Err(e) = editor.load_history(&history)
        {
            tracing::warn!(
                "the chat history {} does not read ({e}); starting without it",
                history.display()
            );
        }
        // A terminal rustyline does not drive (TERM=dumb) has no printer:
        // input is then read as piped input is.
        let Ok(printer) = editor.create_external_printer() else {
            return Ok(None);
        };
        let printer = Box::new(printer);
        let mode = TerminalMode::save();
        let (requests, asked) = std::sync::mpsc::channel();
        let (given, inputs) = tokio::sync::mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("chat-editor".into())
            .spawn(move || serve(editor, history, asked, given))
            .context("starting the line editor's thread")?;
        let editor = LineEditor {
            requests,
            inputs,
            reading: false,
            _mode: mode,
        };
        Ok(Some((editor, Printer::new(printer))))
    }

    /// Asks for a line after `prompt`, unless one is asked for already.
    pub fn read(&mut self, prompt: &str) {
        if !self.reading {
            self.reading = true;
            let _ = self.requests.send(Request::Read(prompt.to_string()));
        }
    }

    /// The line asked for.
    pub async fn next(&mut self) -> Result<Input> {
        let input = (self.inputs.recv().await).unwrap_or(Ok(Input::Eof));
        self.reading = false;
        input
    }

    /// Keeps `line` in the history (and its file).
    pub fn remember(&self, line: &str) {
        let _ = self.requests.send(Request::Remember(line.to_string()));
    }
}

fn serve(
    mut editor: Editor<(), FileHistory>,
    history: PathBuf,
    asked: std::sync::mpsc::Receiver<Request>,
    given: tokio::sync::mpsc::UnboundedSender<Result<Input>>,
) {
    for request in asked {
        match request {
            Request::Read(prompt) => {
                let input = match editor.readline(&prompt) {
                    Ok(line) => Ok(Input::Line(line)),
                    Err(ReadlineError::Interrupted) => Ok(Input::Interrupted),
                    Err(ReadlineError::Eof) => Ok(Input::Eof),
                    Err(e) => Err(anyhow::Error::new(e).context("reading the terminal")),
                };
                if given.send(input).is_err() {
                    return;
                }
            }
            Request::Remember(line) => {
                let _ = editor.add_history_entry(line);
                if let Err(e) = editor.save_history(&history) {
                    tracing::warn!("the chat history {} is not saved: {e}", history.display());
                }
            }
        }
    }
}

/// Prints while a line is edited. Streamed text comes in pieces, but
/// rustyline ends every piece with a line of its own: the line not yet ended
/// is kept, shown on one row, and drawn again with each new piece.
pub struct Printer {
    printer: Box<dyn ExternalPrinter + Send>,
    /// The text after the last newline printed, on the row above the prompt.
    open: String,
}

impl Printer {
    fn new(printer: Box<dyn ExternalPrinter + Send>) -> Self {
        Printer {
            printer,
            open: String::new(),
        }
    }

    /// A line was typed under the open line: it is no longer the row above.
    pub fn line_typed(&mut self) {
        self.open.clear();
    }

    pub fn print(&mut self, text: &str) {
        let message = self.message(text, columns());
        if !message.is_empty() {
            let _ = self.printer.print(message);
        }
    }

    /// What to print for `text` on a terminal `columns` wide.
    fn message(&mut self, text: &str, columns: usize) -> String {
        if text.is_empty() {
            return String::new();
        }
        // Up to the row of the open line, and clear it: it is drawn again.
        let mut message = String::from(if self.open.is_empty() {
            ""
        } else {
            "\x1b[1A\r\x1b[2K"
        });
        let all = std::mem::take(&mut self.open) + text;
        let (ended, mut open) = match all.rfind('\n') {
            Some(at) => (&all[..=at], &all[at + 1..]),
            None => ("", all.as_str()),
        };
        message.push_str(ended);
        // The open line fits one row: what does not goes on as ended rows.
        let mut width = 0;
        let mut at = 0;
        for (i, c) in open.char_indices() {
            width += c.width().unwrap_or(0);
            if width >= columns.max(2) {
                message.push_str(&open[at..i]);
                message.push('\n');
                at = i;
                width = c.width().unwrap_or(0);
            }
        }
        open = &open[at..];
        message.push_str(open);
        if !open.is_empty() {
            message.push('\n');
        }
        self.open = open.to_string();
        message
    }
}

/// The terminal's width.
fn columns() -> usize {
    rustix::termios::tcgetwinsize(std::io::stdout())
        .map(|size| usize::from(size.ws_col))
        .ok()
        .filter(|&c| c > 0)
        .unwrap_or(80)
}

/// The terminal's mode when the chat started, put back when it ends (a
/// chat that ends while the editor reads leaves no raw terminal behind).
struct TerminalMode(Option<rustix::termios::Termios>);

impl TerminalMode {
    fn save() -> Self {
        TerminalMode(rustix::termios::tcgetattr(std::io::stdin()).ok())
    }
}

impl Drop for TerminalMode {
    fn drop(&mut self) {
        if let Some(mode) = &self.0 {
            let _ = rustix::termios::tcsetattr(
                std::io::stdin(),
                rustix::termios::OptionalActions::Now,
                mode,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Nothing;
    impl ExternalPrinter for Nothing {
        fn print(&mut self, _: String) -> rustyline::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn an_open_line_is_drawn_again_with_each_piece_and_wraps_at_the_width() {
        let mut printer = Printer::new(Box::new(Nothing));
        assert_eq!(printer.message("Hel", 10), "Hel\n");
        assert_eq!(printer.message("lo\nth", 10), "\x1b[1A\r\x1b[2KHello\nth\n");
        assert_eq!(printer.message("ere\n", 10), "\x1b[1A\r\x1b[2Kthere\n");
        assert_eq!(printer.message("", 10), "");
        assert_eq!(printer.message("abcdefghijkl", 5), "abcd\nefgh\nijkl\n");
        assert_eq!(printer.open, "ijkl");
    }
}
