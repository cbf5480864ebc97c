//! A plugin's exports, bound with the bindings of the WIT version it was
//! built for, and called in the newest version's types whatever that
//! version is: the rest of the host does not know the difference.
//!
//! A plugin of the newest version is called through its own bindings as
//! they are (one `match` arm, nothing converted); one of an older version
//! through that version's bindings, with what crosses converted by its
//! module in [`super::compat`].

use wasmtime::Store;
use wasmtime::component::{Component, ComponentNamedList, Instance, InstancePre, Lift, Lower};

use super::bindings::{WitVersion, latest, v0_1};
use super::sandbox::state::PluginState;

use latest::exports::wasmclaw::plugin::{hooks, tool};
use latest::wasmclaw::plugin::types::{CallContext, PluginError, ToolSpec};
use v0_1::exports::wasmclaw::plugin::{hooks as hooks_v0_1, tool as tool_v0_1};
use v0_1::wasmclaw::plugin::types as types_v0_1;

/// Where a plugin's tool export is, in the bindings of its version.
#[derive(Clone)]
pub enum ToolExport {
    V0_2(tool::GuestIndices),
    V0_1(tool_v0_1::GuestIndices),
}

/// A tool export's functions in one instance.
pub enum BoundTool {
    V0_2(tool::Guest),
    V0_1(tool_v0_1::Guest),
}

impl ToolExport {
    pub fn new(version: WitVersion, pre: &InstancePre<PluginState>) -> wasmtime::Result<Self> {
        Ok(match version {
            WitVersion::V0_2 => Self::V0_2(tool::GuestIndices::new(pre)?),
            WitVersion::V0_1 => Self::V0_1(tool_v0_1::GuestIndices::new(pre)?),
        })
    }

    pub fn load(
        &self,
        store: &mut Store<PluginState>,
        instance: &Instance,
    ) -> wasmtime::Result<BoundTool> {
        Ok(match self {
            Self::V0_2(indices) => BoundTool::V0_2(indices.load(store, instance)?),
            Self::V0_1(indices) => BoundTool::V0_1(indices.load(store, instance)?),
        })
    }

    /// Each exported tool function has the signature of its version's WIT;
    /// the error names the function that does not (instead of failing every
    /// call).
    pub fn check_signatures(
        &self,
        component: &Component,
        instance: &Instance,
        store: &mut Store<PluginState>,
    ) -> Result<(), String> {
        match self {
            Self::V0_2(_) => check_tool_signatures::<ToolSpec, CallContext, PluginError>(
                WitVersion::V0_2.tool_export(),
                component,
                instance,
                store,
            ),
            Self::V0_1(_) => {
                check_tool_signatures::<
                    types_v0_1::ToolSpec,
                    types_v0_1::CallContext,
                    types_v0_1::PluginError,
                >(WitVersion::V0_1.tool_export(), component, instance, store)
            }
        }
    }
}

impl BoundTool {
    pub async fn list_tools(
        &self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Vec<ToolSpec>> {
        match self {
            Self::V0_2(tool) => tool.call_list_tools(store).await,
            Self::V0_1(tool) => Ok(up_all(tool.call_list_tools(store).await?)),
        }
    }

    pub async fn call_tool(
        &self,
        store: &mut Store<PluginState>,
        ctx: CallContext,
        name: &str,
        arguments: &String,
    ) -> wasmtime::Result<Result<String, PluginError>> {
        match self {
            Self::V0_2(tool) => tool.call_call_tool(store, &ctx, name, arguments).await,
            Self::V0_1(tool) => Ok(tool
                .call_call_tool(store, &ctx.into(), name, arguments)
                .await?
                .map_err(Into::into)),
        }
    }
}

/// Where a plugin's hooks export is, in the bindings of its version.
#[derive(Clone)]
pub enum HooksExport {
    V0_2(hooks::GuestIndices),
    V0_1(hooks_v0_1::GuestIndices),
}

/// A hooks export's functions in one instance.
pub enum BoundHooks {
    V0_2(hooks::Guest),
    V0_1(hooks_v0_1::Guest),
}

impl HooksExport {
    pub fn new(version: WitVersion, pre: &InstancePre<PluginState>) -> wasmtime::Result<Self> {
        Ok(match version {
            WitVersion::V0_2 => Self::V0_2(hooks::GuestIndices::new(pre)?),
            WitVersion::V0_1 => Self::V0_1(hooks_v0_1::GuestIndices::new(pre)?),
        })
    }

    pub fn load(
        &self,
        store: &mut Store<PluginState>,
        instance: &Instance,
    ) -> wasmtime::Result<BoundHooks> {
        Ok(match self {
            Self::V0_2(indices) => BoundHooks::V0_2(indices.load(store, instance)?),
            Self::V0_1(indices) => BoundHooks::V0_1(indices.load(store, instance)?),
        })
    }
}

impl BoundHooks {
    pub async fn subscriptions(
        &self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Vec<hooks::Subscription>> {
        match self {
            Self::V0_2(h) => h.call_subscriptions(store).await,
            Self::V0_1(h) => Ok(up_all(h.call_subscriptions(store).await?)),
        }
    }

    pub async fn before_llm(
        &self,
        store: &mut Store<PluginState>,
        ctx: CallContext,
        request: &String,
    ) -> wasmtime::Result<hooks::LlmDecision> {
        match self {
            Self::V0_2(h) => h.call_before_llm(store, &ctx, request).await,
            Self::V0_1(h) => Ok(h.call_before_llm(store, &ctx.into(), request).await?.into()),
        }
    }

    pub async fn after_llm(
        &self,
        store: &mut Store<PluginState>,
        ctx: CallContext,
        response: &String,
    ) -> wasmtime::Result<hooks::LlmDecision> {
        match self {
            Self::V0_2(h) => h.call_after_llm(store, &ctx, response).await,
            Self::V0_1(h) => Ok(h.call_after_llm(store, &ctx.into(), response).await?.into()),
        }
    }

    pub async fn before_tool(
        &self,
        store: &mut Store<PluginState>,
        ctx: CallContext,
        name: &str,
        arguments: &String,
    ) -> wasmtime::Result<hooks::ToolDecision> {
        match self {
            Self::V0_2(h) => h.call_before_tool(store, &ctx, name, arguments).await,
            Self::V0_1(h) => Ok(h
                .call_before_tool(store, &ctx.into(), name, arguments)
                .await?
                .into()),
        }
    }

    pub async fn after_tool(
        &self,
        store: &mut Store<PluginState>,
        ctx: CallContext,
        name: &str,
        arguments: &String,
        outcome: Result<String, PluginError>,
    ) -> wasmtime::Result<hooks::ResultDecision> {
        match self {
            Self::V0_2(h) => {
                let outcome = outcome.as_ref().map(String::as_str);
                h.call_after_tool(store, &ctx, name, arguments, outcome)
                    .await
            }
            Self::V0_1(h) => {
                let outcome = outcome.map_err(types_v0_1::PluginError::from);
                let outcome = outcome.as_ref().map(String::as_str);
                Ok(
                    h.call_after_tool(store, &ctx.into(), name, arguments, outcome)
                        .await?
                        .into(),
                )
            }
        }
    }

    pub async fn on_event(
        &self,
        store: &mut Store<PluginState>,
        ctx: CallContext,
        event: &String,
    ) -> wasmtime::Result<()> {
        match self {
            Self::V0_2(h) => h.call_on_event(store, &ctx, event).await,
            Self::V0_1(h) => h.call_on_event(store, &ctx.into(), event).await,
        }
    }
}

/// Each item of an older version's list, in the newest types.
fn up_all<Old, New: From<Old>>(items: Vec<Old>) -> Vec<New> {
    items.into_iter().map(New::from).collect()
}

/// `list-tools` and `call-tool` of `export` have the signatures of the
/// version whose types are `Spec`, `Ctx` and `Error`.
fn check_tool_signatures<Spec, Ctx, Error>(
    export: &str,
    component: &Component,
    instance: &Instance,
    store: &mut Store<PluginState>,
) -> Result<(), String>
where
    (Vec<Spec>,): ComponentNamedList + Lift + Send + Sync + 'static,
    (Ctx, String, String): ComponentNamedList + Lower + Send + Sync + 'static,
    (Result<String, Error>,): ComponentNamedList + Lift + Send + Sync + 'static,
{
    let iface = component
        .get_export_index(None, export)
        .ok_or_else(|| format!("does not export {export}"))?;
    let func = |name: &str| {
        component
            .get_export_index(Some(&iface), name)
            .ok_or_else(|| format!("its {export} export has no function `{name}`"))
    };
    let mismatch = |name: &str, e: wasmtime::Error| {
        // Skip wasmtime's generic "failed to convert function to given type".
        let cause = e
            .chain()
            .skip(1)
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(": ");
        format!(
            "function `{name}` of {export} does not have this host's signature (was the component built against a changed copy of the WIT?): {cause}"
        )
    };
    instance
        .get_typed_func::<(), (Vec<Spec>,)>(&mut *store, &func("list-tools")?)
        .map_err(|e| mismatch("list-tools", e))?;
    instance
        .get_typed_func::<(Ctx, String, String), (Result<String, Error>,)>(
            &mut *store,
            &func("call-tool")?,
        )
        .map_err(|e| mismatch("call-tool", e))?;
    Ok(())
}
