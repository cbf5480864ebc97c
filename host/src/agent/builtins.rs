//! The built-in tools, the host's own source in the tool registry (see
//! [`super::registry`]): `subagent` runs a sub-agent on a task and returns
//! its answer; `spawn` starts one and returns at once, its result arriving
//! later (see [`super::subturn`]); `history_search` searches the session's
//! stored messages (see [`super::history_search`]).
//!
//! Each is a handler registered with its definition. A handler parses a
//! call's arguments into its request, whose errors name the field (a
//! hook's rewrite is checked against the schema first, by the turn loop).

use std::sync::{Arc, LazyLock};

use futures_util::future::BoxFuture;
use serde_json::json;

use super::registry::{Caller, ToolSet, ToolSource};
use super::subturn::Parent;
use crate::plugin::tools::Tool;
use crate::plugin::{ErrorKind, ToolError};
use crate::protocol::SubTurnRequest;

pub const SUBAGENT: &str = "subagent";
pub const SPAWN: &str = "spawn";

/// Runs one built-in's call, with these arguments, for the turn `parent`.
type Handler = for<'a> fn(&'a Parent, &'a str, &'a str) -> BoxFuture<'a, Result<String, ToolError>>;

/// `subagent` and `spawn`: their arguments are a SubTurn's request.
fn subturn<'a>(
    parent: &'a Parent,
    name: &'a str,
    arguments: &'a str,
) -> BoxFuture<'a, Result<String, ToolError>> {
    Box::pin(async move {
        let request: SubTurnRequest = serde_json::from_str(arguments).map_err(|e| {
            ToolError::new(
                ErrorKind::InvalidInput,
                format!("arguments of '{name}': {e}"),
            )
        })?;
        match name {
            SPAWN => parent.spawn_tool(request).await,
            _ => parent.subagent(request).await,
        }
    })
}

fn history_search<'a>(
    parent: &'a Parent,
    _name: &'a str,
    arguments: &'a str,
) -> BoxFuture<'a, Result<String, ToolError>> {
    Box::pin(super::history_search::run(parent, arguments))
}

/// The built-in tools as a source: always the same set.
pub struct Builtins;

/// The built-in tools, in the order offered, each with its handler.
struct BuiltinSet(Vec<(Tool, Handler)>);

static SET: LazyLock<Arc<BuiltinSet>> = LazyLock::new(|| {
    let parameters = json!({
        "type": "object",
        "properties": {
            "task": {"type": "string", "description": "What the sub-agent must do; it sees nothing else of this conversation."},
            "label": {"type": "string", "description": "A short name for it."},
            "model": {"type": "string", "description": "Another model of the same provider."},
            "agent": {"type": "string", "description": "A named agent of this host to run it as: its own prompt, model and tools (within yours)."},
            "tools": {"type": "array", "items": {"type": "string"}, "description": "The tools it may use: a subset of yours (default: all)."},
            "critical": {"type": "boolean", "description": "Finish even if this turn ends early."},
            "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 86400},
            "token_budget": {"type": "integer", "minimum": 1}
        },
        "required": ["task"],
        "additionalProperties": false
    });
    Arc::new(BuiltinSet(vec![
        (
            Tool::builtin(
                SUBAGENT,
                "Runs a sub-agent on a task and returns its final answer.",
                parameters.clone(),
            ),
            subturn as Handler,
        ),
        (
            Tool::builtin(
                SPAWN,
                "Starts a sub-agent on a task and returns its id at once; its result arrives as a message later in this turn (or as a new turn if this one has ended).",
                parameters,
            ),
            subturn as Handler,
        ),
        (
            super::history_search::definition(),
            history_search as Handler,
        ),
    ]))
});

impl ToolSource for Builtins {
    fn label(&self) -> &str {
        "built-in"
    }

    fn current(&self) -> Arc<dyn ToolSet> {
        SET.clone()
    }
}

impl ToolSet for BuiltinSet {
    fn tools(&self) -> Vec<&Tool> {
        self.0.iter().map(|(tool, _)| tool).collect()
    }

    fn tool(&self, name: &str) -> Option<&Tool> {
        self.0
            .iter()
            .find(|(tool, _)| tool.name == name)
            .map(|(tool, _)| tool)
    }

    /// Boxed: a turn runs tool calls, which may run turns.
    fn call<'a>(
        &'a self,
        name: &'a str,
        arguments: &'a str,
        caller: Caller<'a>,
    ) -> BoxFuture<'a, Result<String, ToolError>> {
        Box::pin(async move {
            let Some((_, handler)) = self.0.iter().find(|(tool, _)| tool.name == name) else {
                return Err(ToolError::new(
                    ErrorKind::NotFound,
                    format!("'{name}' is not a built-in tool"),
                ));
            };
            handler(caller.turn, name, arguments).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Their schemas are compiled on first call: each must compile.
    #[test]
    fn every_built_in_schema_compiles() {
        for tool in SET
            .tools()
            .into_iter()
            .filter(|t| t.name != super::super::history_search::HISTORY_SEARCH)
        {
            let err = tool.check_arguments(r#"{"task": 1}"#).unwrap_err();
            assert_eq!(
                err.kind,
                ErrorKind::InvalidInput,
                "{}: {}",
                tool.name,
                err.message
            );
            tool.check_arguments(r#"{"task": "t"}"#).unwrap();
        }
    }
}
