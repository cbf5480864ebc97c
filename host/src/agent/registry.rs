//! The tool registry: every tool a turn may call, whatever offers it.
//!
//! Tools come from [`ToolSource`]s. A source says which tools it offers now
//! (a [`ToolSet`]: an immutable snapshot, replaced as a whole when the list
//! changes) and runs a call of one of them. The sources today:
//!
//! 1. the built-in tools `subagent`, `spawn` and `history_search`
//!    ([`super::builtins`]);
//! 2. the plugins' tools: [`Plugins`], whose snapshot is the current
//!    [`Catalog`] (a new one after every reload);
//! 3. each MCP server of `[mcp.servers]` ([`crate::mcp::client`]): remote,
//!    its list changing when the server says so. It keeps its latest list
//!    as a [`ToolSet`] and hands it out from [`ToolSource::current`], and
//!    its [`ToolSet::call`] goes over its connection. Nothing in the turn
//!    loop changes for it.
//!
//! # Precedence and order
//!
//! The built-ins come first, then the sources in the order given to
//! [`Registry::new`] (the plugins, then later ones). A name offered by two
//! sources goes to the earlier one; the later one's tool is shadowed: left
//! out of the list and never called, and logged (a warning, each time the
//! list is rebuilt). Plugins cannot shadow a built-in at all: a plugin that
//! offers a built-in's name fails to load (see
//! [`crate::plugin::tools::RESERVED_TOOL_NAMES`]).
//!
//! The list offered to the model holds the tools of every source after the
//! built-ins, in source order (the plugins' sorted by name), then the
//! built-ins: the order requests have always had.
//!
//! # Caching
//!
//! The list and the name index are built once per combination of the
//! sources' snapshots, and rebuilt when any source hands out a different
//! snapshot (compared by pointer: a source returns the same `Arc` until its
//! list changes). So a plugin reload is seen on the next lookup, and a model
//! request costs one snapshot read per source, never a rebuild.
//!
//! # Calls
//!
//! [`Registry::lookup`] finds a call's tool once; the turn loop checks a
//! hook's rewrite of the arguments against that tool's schema
//! ([`Found::check_arguments`]) and runs the call through it
//! ([`Found::call`]), so it runs on the snapshot it was found in even if a
//! reload happens meanwhile. The source validates the arguments a call runs
//! with: a plugin's tool against its schema, a built-in by parsing them into
//! its request (whose errors name the field).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;

use super::context::OfferedTools;
use super::subturn::Parent;
use crate::config::Permission;
use crate::llm::ToolDef;
use crate::plugin::call::Spawner;
use crate::plugin::tools::Tool;
use crate::plugin::{CallContext, Catalog, ErrorKind, Limits, Plugins, ToolError};

/// What offers tools: the built-ins, the plugins, later an MCP server.
pub trait ToolSource: Send + Sync {
    /// Who offers the tools, for the host log: `built-in`, `plugins`.
    fn label(&self) -> &str;

    /// The tools on offer now. Called on every lookup and model request, so
    /// cheap: the same `Arc` until the list changes, then a new one.
    fn current(&self) -> Arc<dyn ToolSet>;
}

/// One source's tools at one moment; never changes once handed out.
pub trait ToolSet: Send + Sync {
    /// Every tool, in the order offered to the model; names are unique.
    fn tools(&self) -> Vec<&Tool>;

    /// The tool named `name`, if this set offers it.
    fn tool(&self, name: &str) -> Option<&Tool>;

    /// The most bytes a result of `name` may hold: what a hook answering in
    /// its place is held to.
    fn output_limit(&self, _name: &str) -> usize {
        Limits::default().output_bytes
    }

    /// What the source's own approval rules give a call of `name` (a
    /// plugin's grants file); None: they name it not.
    fn permission(&self, _name: &str) -> Option<Permission> {
        None
    }

    /// Runs a call of `name` (a tool of this set) for `caller`. `arguments`
    /// are a JSON object; the set validates them further.
    fn call<'a>(
        &'a self,
        name: &'a str,
        arguments: &'a str,
        caller: Caller<'a>,
    ) -> BoxFuture<'a, Result<String, ToolError>>;
}

/// Who a call runs for.
#[derive(Clone, Copy)]
pub struct Caller<'a> {
    /// The calling turn (what a built-in starts its SubTurns under).
    pub turn: &'a Parent,
    /// The turn and the call's id, as a plugin or a hook is told.
    pub ctx: &'a CallContext,
}

/// Every tool on offer, over its sources.
pub struct Registry {
    /// In precedence order: the built-ins first.
    sources: Vec<Arc<dyn ToolSource>>,
    built: Mutex<Option<Arc<Built>>>,
}

/// What is built from one snapshot of every source.
struct Built {
    /// Per source, the snapshot this was built from.
    sets: Vec<Arc<dyn ToolSet>>,
    /// Every tool's definition, with the tokens they take estimated once.
    offered: OfferedTools,
    /// Which source's tool a name calls.
    owner: HashMap<String, usize>,
}

/// A tool found by name, in the snapshot of the source that offers it.
pub struct Found {
    set: Arc<dyn ToolSet>,
    name: String,
    source: usize,
}

impl Registry {
    /// The built-ins, then `sources`, in precedence order.
    pub fn new(builtins: Arc<dyn ToolSource>, sources: Vec<Arc<dyn ToolSource>>) -> Registry {
        Registry {
            sources: std::iter::once(builtins).chain(sources).collect(),
            built: Mutex::new(None),
        }
    }

    /// Every tool on offer now, as the model sees them.
    pub fn defs(&self) -> Arc<Vec<ToolDef>> {
        self.current().offered.defs.clone()
    }

    /// The same, with the tokens they take in a request (estimated once per
    /// set of tools, not at each model call).
    pub fn offered(&self) -> OfferedTools {
        self.current().offered.clone()
    }

    /// The tool `name` calls now. An unknown name is a `not-found` error
    /// that lists the tools of the sources after the built-ins (the ones
    /// that come and go), sorted by name.
    pub fn lookup(&self, name: &str) -> Result<Found, ToolError> {
        let built = self.current();
        match built.owner.get(name) {
            Some(&source) => Ok(Found {
                set: built.sets[source].clone(),
                name: name.to_string(),
                source,
            }),
            None => {
                let mut known: Vec<&str> = built
                    .owner
                    .iter()
                    .filter(|(_, source)| **source != 0)
                    .map(|(name, _)| name.as_str())
                    .collect();
                known.sort_unstable();
                Err(ToolError::new(
                    ErrorKind::NotFound,
                    format!(
                        "unknown tool {name:?}; available tools: {}",
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    ),
                ))
            }
        }
    }

    /// The label of the source that offers `found`.
    pub fn source_of(&self, found: &Found) -> &str {
        self.sources[found.source].label()
    }

    /// What is built from the sources' current snapshots, rebuilt if one
    /// changed. (A source's `current` is called with the cache locked: it must not
    /// call back into the registry.)
    fn current(&self) -> Arc<Built> {
        let mut cache = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(built) = &*cache
            && built
                .sets
                .iter()
                .zip(&self.sources)
                .all(|(old, source)| Arc::ptr_eq(old, &source.current()))
        {
            return built.clone();
        }
        let sets = self.sources.iter().map(|s| s.current()).collect();
        let built = Arc::new(self.build(sets));
        *cache = Some(built.clone());
        built
    }

    fn build(&self, sets: Vec<Arc<dyn ToolSet>>) -> Built {
        let mut owner: HashMap<String, usize> = HashMap::new();
        let mut listed: Vec<Vec<ToolDef>> = Vec::with_capacity(sets.len());
        for (i, set) in sets.iter().enumerate() {
            let mut defs = Vec::new();
            for tool in set.tools() {
                if let Some(&winner) = owner.get(&tool.name) {
                    tracing::warn!(
                        tool = %tool.name,
                        source = self.sources[i].label(),
                        by = self.sources[winner].label(),
                        "tool shadowed by one of the same name from an earlier source; it is not offered"
                    );
                    continue;
                }
                owner.insert(tool.name.clone(), i);
                defs.push(ToolDef {
                    name: tool.name.clone(),
                    description: tool.description.clone(),
                    parameters: tool.input_schema.clone(),
                });
            }
            listed.push(defs);
        }
        // The built-ins are listed last.
        listed.rotate_left(1);
        Built {
            sets,
            offered: OfferedTools::new(Arc::new(listed.into_iter().flatten().collect())),
            owner,
        }
    }
}

impl Found {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Checks `arguments` against the tool's schema: what a hook's rewrite
    /// must pass.
    pub fn check_arguments(&self, arguments: &str) -> Result<(), ToolError> {
        match self.set.tool(&self.name) {
            Some(tool) => tool.check_arguments(arguments),
            None => Ok(()),
        }
    }

    /// The most bytes a result of the tool may hold.
    pub fn output_limit(&self) -> usize {
        self.set.output_limit(&self.name)
    }

    /// What the tool's source's approval rules give its calls.
    pub fn permission(&self) -> Option<Permission> {
        self.set.permission(&self.name)
    }

    /// Runs the call with `arguments` for `caller`.
    pub fn call<'a>(
        &'a self,
        arguments: &'a str,
        caller: Caller<'a>,
    ) -> BoxFuture<'a, Result<String, ToolError>> {
        self.set.call(&self.name, arguments, caller)
    }
}

/// The plugins' tools: the current catalog, replaced on every reload.
impl ToolSource for Plugins {
    fn label(&self) -> &str {
        "plugins"
    }

    fn current(&self) -> Arc<dyn ToolSet> {
        self.catalog()
    }
}

/// One plugin set's tools, sorted by name; each call runs in a fresh
/// instance of the plugin that offers the tool.
impl ToolSet for Catalog {
    fn tools(&self) -> Vec<&Tool> {
        Catalog::tools(self)
    }

    fn tool(&self, name: &str) -> Option<&Tool> {
        Catalog::tool(self, name).map(|(_, tool)| tool)
    }

    fn output_limit(&self, name: &str) -> usize {
        Catalog::tool(self, name).map_or(Limits::default().output_bytes, |(plugin, _)| {
            plugin.grants.limits.output_bytes
        })
    }

    fn permission(&self, name: &str) -> Option<Permission> {
        let (plugin, _) = Catalog::tool(self, name)?;
        (plugin.grants.approvals.iter())
            .find(|rule| crate::config::glob_match(&rule.tool, name))
            .map(|rule| rule.permission)
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        arguments: &'a str,
        caller: Caller<'a>,
    ) -> BoxFuture<'a, Result<String, ToolError>> {
        Box::pin(async move {
            let Some((plugin, tool)) = Catalog::tool(self, name) else {
                return Err(ToolError::new(
                    ErrorKind::NotFound,
                    format!("unknown tool {name:?}"),
                ));
            };
            tool.check_arguments(arguments)?;
            let ctx = CallContext {
                spawner: Some(Spawner(Arc::new(caller.turn.plugin_call_spawner()))),
                ..caller.ctx.clone()
            };
            plugin.call(&ctx, name, arguments).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::builtins::Builtins;
    use serde_json::json;

    /// A source whose list the test changes, as a remote server's would.
    struct Changing {
        label: &'static str,
        set: Mutex<Arc<dyn ToolSet>>,
    }

    impl Changing {
        fn new(label: &'static str, names: &[&str]) -> Arc<Changing> {
            Arc::new(Changing {
                label,
                set: Mutex::new(Arc::new(Fixed::of(names))),
            })
        }

        fn offer(&self, names: &[&str]) {
            *self.set.lock().unwrap() = Arc::new(Fixed::of(names));
        }
    }

    impl ToolSource for Changing {
        fn label(&self) -> &str {
            self.label
        }

        fn current(&self) -> Arc<dyn ToolSet> {
            self.set.lock().unwrap().clone()
        }
    }

    struct Fixed(Vec<Tool>);

    impl Fixed {
        fn of(names: &[&str]) -> Fixed {
            let schema = json!({"type": "object", "properties": {"x": {"type": "integer"}}});
            Fixed(
                names
                    .iter()
                    .map(|n| Tool::builtin(n, "a test tool", schema.clone()))
                    .collect(),
            )
        }
    }

    impl ToolSet for Fixed {
        fn tools(&self) -> Vec<&Tool> {
            self.0.iter().collect()
        }

        fn tool(&self, name: &str) -> Option<&Tool> {
            self.0.iter().find(|t| t.name == name)
        }

        fn call<'a>(
            &'a self,
            name: &'a str,
            _: &'a str,
            _: Caller<'a>,
        ) -> BoxFuture<'a, Result<String, ToolError>> {
            Box::pin(async move { Ok(name.to_string()) })
        }
    }

    fn names(registry: &Registry) -> Vec<String> {
        registry.defs().iter().map(|d| d.name.clone()).collect()
    }

    #[test]
    fn a_built_in_shadows_a_later_sources_tool_of_the_same_name() {
        let plugins = Changing::new("plugins", &["add", "spawn"]);
        let registry = Registry::new(Arc::new(Builtins), vec![plugins]);
        // Listed once, among the built-ins, last.
        assert_eq!(
            names(&registry),
            ["add", "subagent", "spawn", "history_search"]
        );
        let spawn = registry.lookup("spawn").unwrap();
        assert_eq!(registry.source_of(&spawn), "built-in");
        // The built-in's schema, not the plugin's.
        assert!(spawn.check_arguments(r#"{"task": "t"}"#).is_ok());
        assert!(spawn.check_arguments(r#"{"x": 1}"#).is_err());
        let add = registry.lookup("add").unwrap();
        assert_eq!(registry.source_of(&add), "plugins");
    }

    #[test]
    fn an_earlier_source_wins_a_name_over_a_later_one() {
        let first = Changing::new("first", &["b", "a"]);
        let second = Changing::new("second", &["a", "c"]);
        let registry = Registry::new(Arc::new(Builtins), vec![first, second]);
        assert_eq!(
            names(&registry),
            ["b", "a", "c", "subagent", "spawn", "history_search"]
        );
        let a = registry.lookup("a").unwrap();
        assert_eq!(registry.source_of(&a), "first");
    }

    #[test]
    fn an_unknown_tool_is_not_found_and_the_error_lists_the_loaded_tools() {
        let plugins = Changing::new("plugins", &["log", "add"]);
        let registry = Registry::new(Arc::new(Builtins), vec![plugins.clone()]);
        let Err(error) = registry.lookup("teleport") else {
            panic!("found a tool named teleport");
        };
        assert_eq!(
            (error.kind, error.message.as_str()),
            (
                ErrorKind::NotFound,
                "unknown tool \"teleport\"; available tools: add, log"
            )
        );
        plugins.offer(&[]);
        let Err(error) = registry.lookup("teleport") else {
            panic!("found a tool named teleport");
        };
        assert_eq!(
            error.message,
            "unknown tool \"teleport\"; available tools: none"
        );
    }

    #[test]
    fn a_changed_list_is_seen_on_the_next_lookup_and_an_unchanged_one_is_not_rebuilt() {
        let plugins = Changing::new("plugins", &["add"]);
        let registry = Registry::new(Arc::new(Builtins), vec![plugins.clone()]);
        let before = registry.defs();
        assert!(Arc::ptr_eq(&before, &registry.defs()));
        assert!(registry.lookup("echo").is_err());

        plugins.offer(&["add", "echo"]);
        assert!(registry.lookup("echo").is_ok());
        let after = registry.defs();
        assert!(!Arc::ptr_eq(&before, &after));
        assert_eq!(
            names(&registry),
            ["add", "echo", "subagent", "spawn", "history_search"]
        );

        plugins.offer(&[]);
        assert!(registry.lookup("add").is_err());
        assert_eq!(names(&registry), ["subagent", "spawn", "history_search"]);
    }

    #[test]
    fn a_found_tool_keeps_the_snapshot_it_was_found_in() {
        let plugins = Changing::new("plugins", &["add"]);
        let registry = Registry::new(Arc::new(Builtins), vec![plugins.clone()]);
        let add = registry.lookup("add").unwrap();
        plugins.offer(&[]);
        assert_eq!(add.name(), "add");
        assert!(add.check_arguments(r#"{"x": "one"}"#).is_err());
        assert!(add.check_arguments(r#"{"x": 1}"#).is_ok());
    }
}
