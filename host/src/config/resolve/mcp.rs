//! `[mcp.server]`: what wasmclaw serves to MCP clients.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::super::document::Step;
use super::super::mcp::{McpServeSettings, McpServeToml};
use super::super::settings::{AgentSettings, glob_match};
use super::{Resolver, range};

const AT: [Step<'static>; 2] = [Step::Key("mcp"), Step::Key("server")];

fn key<'k>(field: &'k str) -> [Step<'k>; 3] {
    [AT[0], AT[1], Step::Key(field)]
}

pub(super) fn server(
    r: &mut Resolver,
    t: Option<&McpServeToml>,
    agents: &BTreeMap<String, Arc<AgentSettings>>,
) -> McpServeSettings {
    let defaults = McpServeSettings::default();
    let Some(t) = t else {
        return defaults;
    };
    let mut served = Vec::new();
    for (i, pattern) in t.agents.iter().flatten().enumerate() {
        let matched: Vec<&String> = (agents.keys())
            .filter(|name| glob_match(pattern, name))
            .collect();
        if matched.is_empty() {
            let names: Vec<&str> = agents.keys().map(String::as_str).collect();
            r.fail_in_file(
                &[AT[0], AT[1], Step::Key("agents"), Step::Index(i)],
                format!(
                    "expected the name of an agent (or a glob), one of: {}",
                    names.join(", ")
                ),
            );
        }
        for name in matched {
            if !served.contains(name) {
                served.push(name.clone());
            }
        }
    }
    let progress = r.file(
        &key("progress_ms"),
        t.progress_ms,
        defaults.progress,
        |ms| range(100, 3_600_000)(ms).map(Duration::from_millis),
    );
    let hosts = extend(
        r,
        ("allowed_hosts", &t.allowed_hosts),
        defaults.allowed_hosts,
        |h| !h.is_empty() && !h.contains(['/', ' ', '*', '@']),
        "expected a host name or address and an optional port, without scheme or path",
    );
    let origins = extend(
        r,
        ("allowed_origins", &t.allowed_origins),
        defaults.allowed_origins,
        |o| (o.starts_with("http://") || o.starts_with("https://")) && !o.contains(' '),
        "expected an origin: http:// or https://, a host and an optional port (`:*` for any)",
    );
    McpServeSettings {
        agents: served,
        approve: t.approve.unwrap_or(defaults.approve),
        progress,
        allowed_hosts: hosts,
        allowed_origins: origins,
    }
}

/// `defaults`, then each entry of the list at `field` that `valid` accepts;
/// each other one is an error naming it.
fn extend(
    r: &mut Resolver,
    (field, list): (&str, &Option<Vec<String>>),
    mut defaults: Vec<String>,
    valid: impl Fn(&str) -> bool,
    expected: &str,
) -> Vec<String> {
    for (i, entry) in list.iter().flatten().enumerate() {
        if !valid(entry) {
            let at = [AT[0], AT[1], Step::Key(field), Step::Index(i)];
            r.fail_in_file(&at, format!("{expected}, found {entry:?}"));
        } else if !defaults.contains(entry) {
            defaults.push(entry.clone());
        }
    }
    defaults
}
