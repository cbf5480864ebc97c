//! One hook call in a fresh instance, within the hook's own budget (the
//! `[hooks]` settings of its grants, by default 50 ms and 16 MiB), with the
//! plugin's grants, shown what that budget can hold ([`super::hook_view`]).

use serde_json::Value;

use std::sync::Arc;

use super::bindings::wit_hooks as wit;
use super::call::{CallContext, wit_context};
use super::error::ToolError;
use super::hook_view::{Cuts, INPUT_SHARE, RestoreTooLarge, TooLarge, input_bound};
use super::loader::Plugin;
use super::policy::grants::Limits;
use super::policy::hook_settings::FailMode;
use super::sandbox::deadline::Deadline;
use super::sandbox::failure::describe_failure;
use super::sandbox::pool;
use super::sandbox::state::PluginState;
use super::subscriptions::HookPoint;
use super::units::size;

pub use wit::{LlmDecision, ResultDecision, ToolDecision};

/// What a hook is shown.
pub enum HookInput<'a> {
    /// The request as JSON.
    BeforeLlm(&'a String),
    /// The response as JSON.
    AfterLlm(&'a String),
    BeforeTool {
        tool: &'a str,
        arguments: &'a String,
    },
    AfterTool {
        tool: &'a str,
        arguments: &'a String,
        outcome: &'a Result<String, ToolError>,
    },
    /// The event as JSON.
    OnEvent(&'a String),
}

/// [`HookInput`] copied, for the call on the plugin pool.
enum OwnedInput {
    BeforeLlm(String),
    AfterLlm(String),
    BeforeTool {
        tool: String,
        arguments: String,
    },
    AfterTool {
        tool: String,
        arguments: String,
        outcome: Result<String, wit::PluginError>,
    },
    OnEvent(String),
}

impl From<HookInput<'_>> for OwnedInput {
    fn from(input: HookInput<'_>) -> Self {
        match input {
            HookInput::BeforeLlm(request) => OwnedInput::BeforeLlm(request.clone()),
            HookInput::AfterLlm(response) => OwnedInput::AfterLlm(response.clone()),
            HookInput::BeforeTool { tool, arguments } => OwnedInput::BeforeTool {
                tool: tool.to_string(),
                arguments: arguments.clone(),
            },
            HookInput::AfterTool {
                tool,
                arguments,
                outcome,
            } => OwnedInput::AfterTool {
                tool: tool.to_string(),
                arguments: arguments.clone(),
                outcome: outcome.clone().map_err(wit::PluginError::from),
            },
            HookInput::OnEvent(event) => OwnedInput::OnEvent(event.clone()),
        }
    }
}

/// What it answered.
pub enum HookOutput {
    Llm(LlmDecision),
    Tool(ToolDecision),
    Result(ResultDecision),
    Observed,
}

impl Plugin {
    /// Calls the hook for `input` in a fresh instance. The error says in
    /// plain words why the call failed (a trap, a breached limit).
    pub async fn call_hook(
        self: &Arc<Self>,
        ctx: &CallContext,
        input: HookInput<'_>,
    ) -> Result<HookOutput, String> {
        if self.hooks_export.is_none() {
            return Err(format!("plugin '{}' exports no hooks", self.name));
        }
        let settings = &self.grants.hooks;
        let mut cuts = Cuts::default();
        let cut = self.shown(&input, &mut cuts)?;
        let input = match &cut {
            Some(cut) => cut.input(&input),
            None => input,
        };
        let limits = Limits {
            memory_bytes: settings.memory_bytes,
            timeout: settings.timeout,
            ..self.grants.limits.clone()
        };
        let deadline = Deadline::new(limits.timeout, ctx.deadline);
        let store = PluginState::builder(&self.name, &limits, deadline.clone())
            .granted(
                &self.grants,
                self.runtime.secrets(),
                self.runtime.descriptors(),
            )
            .config(self.grants.config_json.clone())
            .build(self.runtime.engine(), self.runtime.epochs())
            .map_err(|e| format!("plugin '{}' could not start: {e:#}", self.name))?;
        let wit_ctx = wit_context(ctx, &deadline);
        let (plugin, input) = (self.clone(), OwnedInput::from(input));
        let (store, outcome) = pool::call_guest(
            store,
            Box::new(move |store| {
                Box::pin(async move {
                    let export = plugin.hooks_export.as_ref().expect("checked above");
                    let instance = plugin.pre.instantiate_async(&mut *store).await?;
                    let hooks = export.load(&mut *store, &instance)?;
                    let ctx = wit_ctx;
                    Ok(match input {
                        OwnedInput::BeforeLlm(request) => {
                            HookOutput::Llm(hooks.before_llm(&mut *store, ctx, &request).await?)
                        }
                        OwnedInput::AfterLlm(response) => {
                            HookOutput::Llm(hooks.after_llm(&mut *store, ctx, &response).await?)
                        }
                        OwnedInput::BeforeTool { tool, arguments } => HookOutput::Tool(
                            hooks
                                .before_tool(&mut *store, ctx, &tool, &arguments)
                                .await?,
                        ),
                        OwnedInput::AfterTool {
                            tool,
                            arguments,
                            outcome,
                        } => HookOutput::Result(
                            hooks
                                .after_tool(&mut *store, ctx, &tool, &arguments, outcome)
                                .await?,
                        ),
                        OwnedInput::OnEvent(event) => {
                            hooks.on_event(&mut *store, ctx, &event).await?;
                            HookOutput::Observed
                        }
                    })
                })
            }),
        )
        .await;
        let output =
            outcome.map_err(|e| describe_failure(&self.name, store.data(), &limits, &e))?;
        if cuts.is_empty() {
            return Ok(output);
        }
        output.restored(&mut cuts).map_err(|e| {
            format!(
                "plugin '{}' answered with more cut texts to put back whole than its input held ({}); its answer is refused",
                self.name,
                size(e.room as u64)
            )
        })
    }

    /// What this hook is shown of `input`: `None` for all of it, or the cut
    /// parts. The error says why it cannot be shown any.
    fn shown(&self, input: &HookInput<'_>, cuts: &mut Cuts) -> Result<Option<CutInput>, String> {
        let memory = self.grants.hooks.memory_bytes;
        let bound = input_bound(memory);
        let whole = input.size();
        if whole <= bound {
            return Ok(None);
        }
        let point = input.point();
        let budget = |what: String| {
            format!(
                "{what}, more than the {} its memory budget of {} lets a hook be shown (one {INPUT_SHARE}th); raise hooks.memory_mib in its grants",
                size(bound as u64),
                size(memory)
            )
        };
        if matches!(point, HookPoint::BeforeTool | HookPoint::AfterTool)
            && self.grants.hooks.fail_mode(point) == FailMode::Closed
        {
            return Err(budget(format!(
                "it was not called: a hook that fails closed is shown a tool call whole or not at all, and this one's input is {}",
                size(whole as u64)
            )));
        }
        let too_large = |e: TooLarge| {
            budget(format!(
                "it was not called: its input is {}, and {} even with every long text cut",
                size(e.size as u64),
                size(e.smallest as u64)
            ))
        };
        let cut = match input {
            HookInput::BeforeLlm(json) | HookInput::AfterLlm(json) | HookInput::OnEvent(json) => {
                let mut doc = Doc::of(json);
                cuts.fit(&mut [&mut doc.value], bound).map_err(too_large)?;
                CutInput::Json(doc.text())
            }
            HookInput::BeforeTool { tool, arguments } => {
                let mut name = Value::String(tool.to_string());
                let mut args = Doc::of(arguments);
                cuts.fit(&mut [&mut name, &mut args.value], bound)
                    .map_err(too_large)?;
                CutInput::Tool {
                    arguments: args.text(),
                    outcome: None,
                }
            }
            HookInput::AfterTool {
                tool,
                arguments,
                outcome,
            } => {
                let mut name = Value::String(tool.to_string());
                let mut args = Doc::of(arguments);
                let mut text = Doc::text_of(match outcome {
                    Ok(text) => text,
                    Err(e) => &e.message,
                });
                cuts.fit(&mut [&mut name, &mut args.value, &mut text.value], bound)
                    .map_err(too_large)?;
                let text = text.text();
                CutInput::Tool {
                    arguments: args.text(),
                    outcome: Some(match outcome {
                        Ok(_) => Ok(text),
                        Err(e) => Err(ToolError {
                            message: text,
                            ..e.clone()
                        }),
                    }),
                }
            }
        };
        Ok(Some(cut))
    }
}

/// The parts of an input that were cut, owned.
enum CutInput {
    Json(String),
    Tool {
        arguments: String,
        outcome: Option<Result<String, ToolError>>,
    },
}

impl CutInput {
    /// `input` with its cut parts.
    fn input<'a>(&'a self, input: &HookInput<'a>) -> HookInput<'a> {
        match (self, input) {
            (CutInput::Json(json), HookInput::BeforeLlm(_)) => HookInput::BeforeLlm(json),
            (CutInput::Json(json), HookInput::AfterLlm(_)) => HookInput::AfterLlm(json),
            (CutInput::Json(json), HookInput::OnEvent(_)) => HookInput::OnEvent(json),
            (CutInput::Tool { arguments, .. }, HookInput::BeforeTool { tool, .. }) => {
                HookInput::BeforeTool { tool, arguments }
            }
            (
                CutInput::Tool {
                    arguments,
                    outcome: Some(outcome),
                },
                HookInput::AfterTool { tool, .. },
            ) => HookInput::AfterTool {
                tool,
                arguments,
                outcome,
            },
            _ => unreachable!("a cut input has the kind of its input"),
        }
    }
}

impl HookInput<'_> {
    fn point(&self) -> HookPoint {
        match self {
            HookInput::BeforeLlm(_) => HookPoint::BeforeLlm,
            HookInput::AfterLlm(_) => HookPoint::AfterLlm,
            HookInput::BeforeTool { .. } => HookPoint::BeforeTool,
            HookInput::AfterTool { .. } => HookPoint::AfterTool,
            HookInput::OnEvent(_) => HookPoint::OnEvent,
        }
    }

    /// Bytes of text the hook is passed.
    fn size(&self) -> usize {
        match self {
            HookInput::BeforeLlm(json) | HookInput::AfterLlm(json) | HookInput::OnEvent(json) => {
                json.len()
            }
            HookInput::BeforeTool { tool, arguments } => tool.len() + arguments.len(),
            HookInput::AfterTool {
                tool,
                arguments,
                outcome,
            } => {
                let outcome = match outcome {
                    Ok(text) => text.len(),
                    Err(e) => e.message.len(),
                };
                tool.len() + arguments.len() + outcome
            }
        }
    }
}

impl HookOutput {
    /// The texts the hook gave back unchanged from a cut view, put back whole.
    fn restored(self, cuts: &mut Cuts) -> Result<HookOutput, RestoreTooLarge> {
        Ok(match self {
            HookOutput::Llm(LlmDecision::Replace(json)) => {
                HookOutput::Llm(LlmDecision::Replace(cuts.restore_json(json)?))
            }
            HookOutput::Tool(ToolDecision::Rewrite(json)) => {
                HookOutput::Tool(ToolDecision::Rewrite(cuts.restore_json(json)?))
            }
            HookOutput::Tool(ToolDecision::Answer(text)) => {
                HookOutput::Tool(ToolDecision::Answer(cuts.restore_text(text)?))
            }
            HookOutput::Result(ResultDecision::Replace(Ok(text))) => {
                HookOutput::Result(ResultDecision::Replace(Ok(cuts.restore_text(text)?)))
            }
            HookOutput::Result(ResultDecision::Replace(Err(mut e))) => {
                e.message = cuts.restore_text(e.message)?;
                HookOutput::Result(ResultDecision::Replace(Err(e)))
            }
            other => other,
        })
    }
}

/// A text of an input, to cut: its document when it is JSON (the host's
/// documents, call arguments), else the text as one string.
struct Doc {
    value: Value,
    json: bool,
}

impl Doc {
    fn of(text: &str) -> Doc {
        match serde_json::from_str(text) {
            Ok(value) => Doc { value, json: true },
            Err(_) => Doc::text_of(text),
        }
    }

    fn text_of(text: &str) -> Doc {
        Doc {
            value: Value::String(text.to_string()),
            json: false,
        }
    }

    /// The text as the hook is passed it.
    fn text(self) -> String {
        match self.value {
            Value::String(text) if !self.json => text,
            value => value.to_string(),
        }
    }
}
