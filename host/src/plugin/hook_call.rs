//! One hook call in a fresh instance, within the hook's own budget (the
//! `[hooks]` settings of its grants, by default 50 ms and 16 MiB), with the
//! plugin's grants.

use std::sync::Arc;

use super::bindings::wit_hooks as wit;
use super::call::{CallContext, describe_failure, wit_context};
use super::error::ToolError;
use super::grants::Limits;
use super::loader::Plugin;
use super::pool;
use super::sandbox::{Capabilities, Deadline, new_store};

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
        let limits = Limits {
            memory_bytes: settings.memory_bytes,
            timeout: settings.timeout,
            ..self.grants.limits.clone()
        };
        let deadline = Deadline::new(limits.timeout, ctx.deadline);
        let mut store = new_store(
            self.runtime.engine(),
            &self.name,
            &limits,
            Capabilities::Granted(&self.grants, self.runtime.secrets()),
            deadline.clone(),
        )
        .map_err(|e| format!("plugin '{}' could not start: {e:#}", self.name))?;
        store.data_mut().config = self.grants.config_json.clone();
        let wit_ctx = wit_context(ctx, &deadline);
        let (plugin, input) = (self.clone(), OwnedInput::from(input));
        let (store, outcome) = pool::call_guest(
            store,
            Box::new(move |store| {
                Box::pin(async move {
                    let export = plugin.hooks_export.as_ref().expect("checked above");
                    let instance = plugin.pre.instantiate_async(&mut *store).await?;
                    let hooks = export.load(&mut *store, &instance)?;
                    let ctx = &wit_ctx;
                    Ok(match input {
                        OwnedInput::BeforeLlm(request) => HookOutput::Llm(
                            hooks.call_before_llm(&mut *store, ctx, &request).await?,
                        ),
                        OwnedInput::AfterLlm(response) => HookOutput::Llm(
                            hooks.call_after_llm(&mut *store, ctx, &response).await?,
                        ),
                        OwnedInput::BeforeTool { tool, arguments } => HookOutput::Tool(
                            hooks
                                .call_before_tool(&mut *store, ctx, &tool, &arguments)
                                .await?,
                        ),
                        OwnedInput::AfterTool {
                            tool,
                            arguments,
                            outcome,
                        } => {
                            let outcome = outcome.as_ref().map(String::as_str);
                            HookOutput::Result(
                                hooks
                                    .call_after_tool(&mut *store, ctx, &tool, &arguments, outcome)
                                    .await?,
                            )
                        }
                        OwnedInput::OnEvent(event) => {
                            hooks.call_on_event(&mut *store, ctx, &event).await?;
                            HookOutput::Observed
                        }
                    })
                })
            }),
        )
        .await;
        outcome.map_err(|e| describe_failure(&self.name, store.data(), &limits, &e))
    }
}
