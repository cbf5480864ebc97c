//! How `run` streams the answer to stdout.
//!
//! The text of every model reply of the turn is written as it arrives, so a
//! person sees it come and a pipe gets it early. What is written ends up as
//! the answer `--no-stream` prints, with these exceptions, each said:
//!
//! - the text of a reply that calls tools (the model's note before its
//!   calls) is on stdout, on its own line(s) above the answer, and stderr
//!   says it is not the answer;
//! - a reply cut and asked again (`llm_retry` with `discard_partial`): the
//!   line is ended, and stderr says the text above it is void;
//! - an answer that is not the text streamed (changed by an `after-llm`
//!   hook, or asked again without streaming): stderr says so and the answer
//!   follows in full, on a line of its own.
//!
//! The answer ends with one newline: newlines at the end of the streamed text
//! are held back until more text comes.

use std::io::Write;

use crate::protocol::{EventBody, LlmDelta, LlmResponse, LlmRetry};

/// Shown on stderr under the text of a reply that failed and is asked again.
pub const VOID: &str =
    "↑ void: that reply failed and is asked again; the text above is not the answer";

/// Shown on stderr under the text of a reply that calls tools.
pub const BEFORE_TOOLS: &str = "↑ the model's note before its tool calls, not the answer";

/// Shown on stderr when the answer is not what was streamed.
pub const DIFFERS: &str = "the answer is not the text streamed above (a hook changed it, or it was asked again): it follows in full";

/// The answer written to `out` as it streams.
pub struct AnswerStream<W: Write> {
    out: W,
    /// Text was written to `out`.
    written: bool,
    /// The last character written is a newline.
    at_line_start: bool,
    /// Newlines at the end of the text streamed, not written yet.
    held: usize,
    /// The text of the model call streaming now.
    attempt: String,
    /// The text the last reply streamed.
    last_reply: Option<String>,
}

impl<W: Write> AnswerStream<W> {
    pub fn new(out: W) -> Self {
        Self {
            out,
            written: false,
            at_line_start: true,
            held: 0,
            attempt: String::new(),
            last_reply: None,
        }
    }

    /// Takes one event of the turn (not of its SubTurns); what to say on
    /// stderr, if anything.
    pub fn event(&mut self, body: &EventBody) -> std::io::Result<Option<&'static str>> {
        match body {
            EventBody::LlmRequest(_) => {
                self.attempt.clear();
                self.last_reply = None;
            }
            EventBody::LlmDelta(LlmDelta { text, .. }) if !text.is_empty() => {
                if self.attempt.is_empty() {
                    self.new_line()?;
                }
                self.attempt.push_str(text);
                let body = text.trim_end_matches('\n');
                if !body.is_empty() {
                    let held = "\n".repeat(std::mem::take(&mut self.held));
                    self.write(&format!("{held}{body}"))?;
                }
                self.held += text.len() - body.len();
            }
            EventBody::LlmRetry(LlmRetry {
                discard_partial: true,
                ..
            }) if !self.attempt.is_empty() => {
                self.attempt.clear();
                self.new_line()?;
                return Ok(Some(VOID));
            }
            EventBody::LlmResponse(LlmResponse { tool_calls, .. })
                if !tool_calls.is_empty() && !self.attempt.is_empty() =>
            {
                self.attempt.clear();
                self.new_line()?;
                return Ok(Some(BEFORE_TOOLS));
            }
            EventBody::LlmResponse(_) => self.last_reply = Some(std::mem::take(&mut self.attempt)),
            _ => {}
        }
        Ok(None)
    }

    /// The turn ended with `answer` (None: it failed): the answer's end, or
    /// all of it when it is not what was streamed; what to say on stderr.
    pub fn finish(mut self, answer: Option<&str>) -> std::io::Result<Option<&'static str>> {
        let Some(answer) = answer else {
            self.new_line()?;
            return Ok(None);
        };
        let answer = answer.trim_end_matches('\n');
        let streamed = self
            .last_reply
            .take()
            .unwrap_or(std::mem::take(&mut self.attempt));
        let note = if streamed.trim_end_matches('\n') == answer {
            self.held = 0;
            None
        } else {
            let note = (!streamed.is_empty()).then_some(DIFFERS);
            self.new_line()?;
            self.write(answer)?;
            note
        };
        self.write("\n")?;
        Ok(note)
    }

    /// Ends the line written, if one is open; held newlines end it too.
    fn new_line(&mut self) -> std::io::Result<()> {
        if self.written && !self.at_line_start {
            self.write("\n")?;
        }
        self.held = 0;
        Ok(())
    }

    fn write(&mut self, text: &str) -> std::io::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        self.out.write_all(text.as_bytes())?;
        self.out.flush()?;
        self.written = true;
        self.at_line_start = text.ends_with('\n');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{FinishReason, LlmRequest, ToolCallInfo, Usage};

    fn request() -> EventBody {
        EventBody::LlmRequest(LlmRequest {
            iteration: 1,
            model: "m".into(),
            messages: 1,
            tools: 0,
            tokens: 0,
            window: None,
        })
    }

    fn delta(text: &str) -> EventBody {
        EventBody::LlmDelta(LlmDelta {
            iteration: 1,
            text: text.into(),
        })
    }

    fn response(text: &str) -> EventBody {
        EventBody::LlmResponse(LlmResponse {
            iteration: 1,
            model: "m".into(),
            text: text.into(),
            tool_calls: Vec::new(),
            finish_reason: FinishReason::Stop,
            usage: Usage::default(),
            duration_ms: 1.0,
        })
    }

    fn calling(text: &str) -> EventBody {
        let EventBody::LlmResponse(mut response) = response(text) else {
            unreachable!()
        };
        response.tool_calls = vec![ToolCallInfo {
            id: "c1".into(),
            name: "add".into(),
            arguments: "{}".into(),
        }];
        EventBody::LlmResponse(response)
    }

    fn retry() -> EventBody {
        EventBody::LlmRetry(LlmRetry {
            iteration: 1,
            model: "m".into(),
            attempt: 1,
            error: "cut".into(),
            next_model: "m".into(),
            delay_ms: 0,
            discard_partial: true,
        })
    }

    /// stdout and the notes after `events` and an end with `answer`.
    fn run(events: &[EventBody], answer: Option<&str>) -> (String, Vec<&'static str>) {
        let mut out = Vec::new();
        let mut notes = Vec::new();
        let mut stream = AnswerStream::new(&mut out);
        for event in events {
            notes.extend(stream.event(event).unwrap());
        }
        notes.extend(stream.finish(answer).unwrap());
        (String::from_utf8(out).unwrap(), notes)
    }

    #[test]
    fn a_streamed_answer_ends_with_one_newline() {
        let events = [
            request(),
            delta("Hello"),
            delta(" there.\n\n"),
            response(""),
        ];
        assert_eq!(
            run(&events, Some("Hello there.\n\n")),
            ("Hello there.\n".into(), vec![])
        );
        let events = [request(), delta("a\n\n"), delta("b"), response("")];
        assert_eq!(run(&events, Some("a\n\nb")), ("a\n\nb\n".into(), vec![]));
    }

    #[test]
    fn an_answer_not_streamed_is_printed_whole() {
        assert_eq!(
            run(&[request(), response("")], Some("Hi.")),
            ("Hi.\n".into(), vec![])
        );
    }

    #[test]
    fn a_void_attempt_is_said_and_the_answer_goes_on_its_own_line() {
        let events = [
            request(),
            delta("The quick"),
            retry(),
            delta("Fox."),
            response(""),
        ];
        assert_eq!(
            run(&events, Some("Fox.")),
            ("The quick\nFox.\n".into(), vec![VOID])
        );
    }

    #[test]
    fn text_before_tool_calls_stays_above_the_answer() {
        let events = [
            request(),
            delta("Adding."),
            calling("Adding."),
            request(),
            delta("5."),
            response(""),
        ];
        assert_eq!(
            run(&events, Some("5.")),
            ("Adding.\n5.\n".into(), vec![BEFORE_TOOLS])
        );
    }

    #[test]
    fn an_answer_a_hook_changed_follows_in_full() {
        let events = [request(), delta("key sk-1"), response("")];
        assert_eq!(
            run(&events, Some("key [redacted]")),
            ("key sk-1\nkey [redacted]\n".into(), vec![DIFFERS])
        );
    }

    #[test]
    fn a_failed_turn_ends_the_line() {
        assert_eq!(
            run(&[request(), delta("par")], None),
            ("par\n".into(), vec![])
        );
        assert_eq!(run(&[], None), (String::new(), vec![]));
    }
}
