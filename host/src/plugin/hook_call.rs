//! One hook call in a fresh instance, within the hook's own budget (the
//! `[hooks]` settings of its grants, by default 50 ms and 16 MiB), with the
//! plugin's grants.

use super::bindings::wit_hooks as wit;
use super::call::{CallContext, describe_failure, wit_context};
use super::error::ToolError;
use super::grants::Limits;
use super::loader::Plugin;
use super::sandbox::{Capabilities, Deadline, new_store, until_deadline};

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
        &self,
        ctx: &CallContext,
        input: HookInput<'_>,
    ) -> Result<HookOutput, String> {
        let Some(export) = &self.hooks_export else {
            return Err(format!("plugin '{}' exports no hooks", self.name));
        };
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
            Capabilities::Granted(
                &self.grants,
                self.runtime.secrets(),
                self.runtime.descriptors(),
            ),
            deadline.clone(),
        )
        .map_err(|e| format!("plugin '{}' could not start: {e:#}", self.name))?;
        store.data_mut().config = self.grants.config_json.clone();
        let wit_ctx = wit_context(ctx, &deadline);
        let outcome = until_deadline(&mut store, async |store| {
            let instance = self.pre.instantiate_async(&mut *store).await?;
            let hooks = export.load(&mut *store, &instance)?;
            Ok(match input {
                HookInput::BeforeLlm(request) => HookOutput::Llm(
                    hooks
                        .call_before_llm(&mut *store, &wit_ctx, request)
                        .await?,
                ),
                HookInput::AfterLlm(response) => HookOutput::Llm(
                    hooks
                        .call_after_llm(&mut *store, &wit_ctx, response)
                        .await?,
                ),
                HookInput::BeforeTool { tool, arguments } => HookOutput::Tool(
                    hooks
                        .call_before_tool(&mut *store, &wit_ctx, tool, arguments)
                        .await?,
                ),
                HookInput::AfterTool {
                    tool,
                    arguments,
                    outcome,
                } => {
                    let outcome = outcome.clone().map_err(wit::PluginError::from);
                    let outcome = outcome.as_ref().map(String::as_str);
                    HookOutput::Result(
                        hooks
                            .call_after_tool(&mut *store, &wit_ctx, tool, arguments, outcome)
                            .await?,
                    )
                }
                HookInput::OnEvent(event) => {
                    hooks.call_on_event(&mut *store, &wit_ctx, event).await?;
                    HookOutput::Observed
                }
            })
        })
        .await;
        outcome.map_err(|e| describe_failure(&self.name, store.data(), &limits, &e))
    }
}
