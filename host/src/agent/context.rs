//! The context of a model call: how many tokens a request takes, what the
//! model's window leaves for it, and how a request is made to fit.
//!
//! # Counting
//! No tokenizer runs in the host. The provider's reported `input_tokens`
//! of the turn's last request is exact for that request's messages; the
//! messages added since are estimated at a quarter of their bytes plus a
//! few tokens each ([`estimate`]). A request with no reported prefix (a
//! turn's first call, the call after a compaction) is estimated whole.
//! Against OpenAI's BPE tokenizers (`o200k_base`, `cl100k_base`) the
//! estimate is 0.92 of the real count on this repository's Markdown, 1.05
//! on its Rust source and 0.81 on JSON tool outputs (measured by
//! `tests/benches/compaction.rs`): it counts low by up to a fifth, which
//! the threshold's margin (80% by default) and the exact counts taken at
//! every reply absorb.
//!
//! # The window
//! A model's context window comes from `[providers.NAME.models."M"]
//! context_window`, else from its family ([`family_window`]), else from
//! the provider's own overflow error, which names it. The usable window
//! is the context window minus the output the request may ask for minus
//! the tool definitions ([`Budget`]).
//!
//! # Fitting
//! Before a call, compaction (see `agent/turn/compact.rs`) summarizes the
//! older history when the request passes the threshold. The request itself
//! is then shaped here: a tool result longer than its share of the usable
//! window goes to the model cut, with a marker ([`cap_tool_results`]);
//! and when the request is still too long, the largest tool results in the
//! middle of it are replaced by a marker naming the call and its size
//! ([`middle_out`]). Both change only the request: the history keeps every
//! result whole.

mod fit;
mod plan;

use std::sync::Arc;

pub use fit::{cap_tool_results, middle_out, too_long, truncate};
pub use plan::{child_range, history_range};

use crate::llm::{Chain, Message, ToolDef};

/// Tokens every message costs beyond its text (its role, separators).
const PER_MESSAGE: u64 = 4;

/// The default prompt of the summarizing call.
pub const DEFAULT_PROMPT: &str = "You compact a conversation between a user and an assistant that uses tools. \
Write a summary the assistant can continue from with only it and the latest messages: \
what the user asked and decided, every fact, name, number, path and identifier the user or a tool gave, \
which tool calls were made and what they found, and what is still open. \
Plain text, short sentences, no preamble.";

/// How an agent's context is kept within its model's window.
#[derive(Debug, Clone)]
pub struct ContextConfig {
    /// The model's context window, in tokens (None: not known until a
    /// provider's overflow error names it).
    pub window: Option<u64>,
    /// Summarize when a request would pass this fraction of the usable
    /// window (0 < threshold <= 1).
    pub threshold: f64,
    /// User turns before the current one kept verbatim by a compaction.
    pub keep_user_turns: usize,
    /// The system prompt of the summarizing call.
    pub prompt: Arc<str>,
    /// A tool result longer than this fraction of the usable window goes
    /// to the model cut.
    pub tool_result_fraction: f64,
    /// The model that writes summaries (None: the agent's own chain).
    pub model: Option<CompactionModel>,
    /// Compaction on (else only the overflow recovery and the caps apply).
    pub enabled: bool,
}

impl Default for ContextConfig {
    fn default() -> Self {
        ContextConfig {
            window: None,
            threshold: 0.8,
            keep_user_turns: 2,
            prompt: DEFAULT_PROMPT.into(),
            tool_result_fraction: 0.25,
            model: None,
            enabled: true,
        }
    }
}

/// A chain of its own for summaries.
#[derive(Clone)]
pub struct CompactionModel(pub Arc<Chain>);

impl std::fmt::Debug for CompactionModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CompactionModel")
            .field(&self.0.models())
            .finish()
    }
}

/// The window of common model families, for models the configuration
/// says nothing of.
pub fn family_window(model: &str) -> Option<u64> {
    let m = model.to_ascii_lowercase();
    let m = m.rsplit('/').next().unwrap_or(&m);
    let table: &[(&str, u64)] = &[
        ("gpt-4.1", 1_047_576),
        ("gpt-5", 400_000),
        ("gpt-4o", 128_000),
        ("gpt-4-turbo", 128_000),
        ("gpt-3.5-turbo", 16_385),
        ("o1", 200_000),
        ("o3", 200_000),
        ("o4", 200_000),
        ("claude", 200_000),
        ("gemini", 1_048_576),
        ("llama-3", 128_000),
        ("qwen", 32_768),
        ("mistral", 32_768),
    ];
    table
        .iter()
        .find(|(prefix, _)| m.starts_with(prefix))
        .map(|(_, w)| *w)
}

/// About the tokens of `text`: a quarter of its bytes.
pub fn estimate_text(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// About the tokens `message` takes in a request.
pub fn estimate(message: &Message) -> u64 {
    PER_MESSAGE
        + match message {
            Message::System { content } | Message::User { content } => estimate_text(content),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                estimate_text(content)
                    + (tool_calls.iter())
                        .map(|c| PER_MESSAGE + estimate_text(&c.name) + estimate_text(&c.arguments))
                        .sum::<u64>()
            }
            Message::Tool { name, content, .. } => {
                PER_MESSAGE + estimate_text(name) + estimate_text(content)
            }
        }
}

/// About the tokens of `messages`.
pub fn estimate_all(messages: &[Message]) -> u64 {
    messages.iter().map(estimate).sum()
}

/// About the tokens the tool definitions take in a request.
pub fn estimate_tools(tools: &[ToolDef]) -> u64 {
    tools
        .iter()
        .map(|t| {
            PER_MESSAGE
                + estimate_text(&t.name)
                + estimate_text(&t.description)
                + (json_len(&t.parameters) as u64).div_ceil(4)
        })
        .sum()
}

/// The length of `value` as compact JSON, counted without writing it.
fn json_len(value: &serde_json::Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` to a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// The tools a model call offers, and the tokens they take, estimated
/// once for all the counting before the call (and once per set of tools,
/// by the registry).
#[derive(Debug, Clone)]
pub struct OfferedTools {
    pub defs: Arc<Vec<ToolDef>>,
    pub tokens: u64,
}

impl OfferedTools {
    pub fn new(defs: Arc<Vec<ToolDef>>) -> OfferedTools {
        let tokens = estimate_tools(&defs);
        OfferedTools { defs, tokens }
    }
}

/// What one request may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub window: u64,
    /// The output a request may ask for.
    pub output: u64,
    /// The window minus the output minus the tools.
    pub usable: u64,
}

impl Budget {
    /// The budget in `window` of a request whose tools take `tool_tokens`
    /// and that asks for at most `max_output` tokens (None: an eighth of
    /// the window, at most 8,192).
    pub fn new(window: u64, max_output: Option<u32>, tool_tokens: u64) -> Budget {
        let output = max_output.map_or((window / 8).min(8192), u64::from);
        let usable = window.saturating_sub(output + tool_tokens);
        Budget {
            window,
            output,
            usable,
        }
    }

    /// The tokens past which a request is compacted.
    pub fn threshold(&self, fraction: f64) -> u64 {
        (self.usable as f64 * fraction) as u64
    }

    /// The longest tool result, in bytes, sent whole.
    pub fn tool_result_bytes(&self, fraction: f64) -> usize {
        ((self.usable as f64 * fraction) as usize).saturating_mul(4)
    }
}

/// The provider's count of the last request: exact for its first
/// `messages`, as long as they are unchanged.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counted {
    known: Option<(usize, u64)>,
}

impl Counted {
    /// The tokens of a request of `messages` and tools that take
    /// `tool_tokens`: the provider's count of the prefix it saw, and an
    /// estimate of the rest.
    pub fn count(&self, messages: &[Message], tool_tokens: u64) -> u64 {
        match self.known {
            Some((prefix, tokens)) if prefix <= messages.len() => {
                tokens + estimate_all(&messages[prefix..])
            }
            _ => estimate_all(messages) + tool_tokens,
        }
    }

    /// The provider counted `tokens` for a request of the `messages` first
    /// messages of the conversation (0: it reported none).
    pub fn reported(&mut self, messages: usize, tokens: u64) {
        self.known = (tokens > 0).then_some((messages, tokens));
    }

    /// The conversation changed before its end (compacted, shortened): the
    /// count starts over.
    pub fn forget(&mut self) {
        self.known = None;
    }
}

/// The request's size and the window as a provider's overflow error
/// gives them: OpenAI's and vLLM's "maximum context length is N tokens.
/// However, your messages resulted in M tokens" ("you requested M
/// tokens"), Anthropic's "prompt is too long: M tokens > N maximum",
/// llama.cpp's `n_prompt_tokens` and `n_ctx` (see `llm/http.rs`).
pub fn overflow_sizes(message: &str) -> (Option<u64>, Option<u64>) {
    let after = |phrase: &str| -> Option<u64> {
        let at = message.find(phrase)? + phrase.len();
        let digits: String = message[at..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        digits.parse().ok()
    };
    let window = after("maximum context length is")
        .or_else(|| after("tokens >"))
        .or_else(|| after("n_ctx"));
    let request = after("resulted in")
        .or_else(|| after("you requested"))
        .or_else(|| after("prompt is too long:"))
        .or_else(|| after("n_prompt_tokens"));
    (request, window)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_four_providers_overflow_errors_give_their_sizes() {
        let openai = "This model's maximum context length is 4000 tokens. However, your messages resulted in 5123 tokens. Please reduce the length of the messages.";
        let anthropic = "prompt is too long: 5123 tokens > 4000 maximum";
        let llama = "the request exceeds the available context size, try increasing it (n_prompt_tokens 5123, n_ctx 4000)";
        let vllm = "This model's maximum context length is 4000 tokens. However, you requested 5123 tokens (4123 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.";
        for text in [openai, anthropic, llama, vllm] {
            assert_eq!(overflow_sizes(text), (Some(5123), Some(4000)), "{text}");
        }
        assert_eq!(overflow_sizes("context too long"), (None, None));
    }

    #[test]
    fn a_reported_count_holds_for_its_prefix_and_the_rest_is_estimated() {
        let messages = vec![
            Message::user("a".repeat(400)),
            Message::user("b".repeat(40)),
        ];
        let mut counted = Counted::default();
        assert_eq!(counted.count(&messages, 0), 104 + 14);
        counted.reported(1, 90);
        assert_eq!(counted.count(&messages, 0), 90 + 14);
        counted.forget();
        assert_eq!(counted.count(&messages[..1], 0), 104);
    }

    #[test]
    fn the_usable_window_leaves_the_output_and_the_tools() {
        let tools = vec![ToolDef {
            name: "echo".into(),
            description: "x".repeat(100),
            parameters: serde_json::json!({}),
        }];
        let budget = Budget::new(4000, Some(500), estimate_tools(&tools));
        assert_eq!(budget.usable, 4000 - 500 - (4 + 1 + 25 + 1));
        assert_eq!(Budget::new(100_000, None, 0).usable, 100_000 - 8192);
        // The schema's length is counted as its compact JSON's, unwritten.
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"text": {"type": "string", "description": "what to \"echo\" – é"}},
            "required": ["text"],
        });
        assert_eq!(json_len(&schema), schema.to_string().len());
        assert_eq!(family_window("claude-sonnet-4-5"), Some(200_000));
        assert_eq!(family_window("openai/gpt-4o-mini"), Some(128_000));
        assert_eq!(family_window("my-local-model"), None);
    }
}
