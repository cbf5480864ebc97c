//! `wasmclaw plugins list|check|install|call|adapter|dev`.

pub(super) mod install;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Subcommand;

use crate::config::Config;
use crate::home::Home;
use crate::plugin::loader::Plugin;
use crate::plugin::policy::grants::{DirMode, FailMode};
use crate::plugin::units::{duration, size};
use crate::plugin::{CallContext, PluginStatus, Plugins};

#[derive(Subcommand, Debug)]
pub enum PluginsCommand {
    /// Every file in the plugin directory: status, world, tools, grants.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Exit 0 if FILE would load; otherwise print the reason and exit 1.
    Check { file: PathBuf },
    /// Check FILE as `check` does, with its grants, then copy it (and its
    /// grants, as NAME.toml) into the plugin directory, atomically: a
    /// running `serve` picks it up whole.
    Install {
        /// The component, NAME.wasm.
        file: PathBuf,
        /// Its grants file; default: NAME.toml beside FILE, if there is
        /// one; none is no capabilities.
        grants: Option<PathBuf>,
        /// Replace a plugin of that name (an old grants file is removed
        /// when the new plugin has none).
        #[arg(long)]
        force: bool,
    },
    /// Run one tool call in a fresh instance and print the result.
    Call {
        #[arg(long)]
        json: bool,
        tool: String,
        /// The arguments, a JSON object.
        #[arg(default_value = "{}")]
        args: String,
    },
    /// Write the WASI preview1 reactor adapter of this host's wasmtime to
    /// FILE. C, Zig and Go plugins are core modules built for preview1;
    /// `wasm-tools component new core.wasm --adapt wasi_snapshot_preview1=FILE`
    /// turns one into a component this host runs.
    Adapter { file: PathBuf },
    /// Build the plugin folder DIR with its ./build.sh, check the NAME.wasm
    /// it writes and install it (with NAME.toml) into the plugin directory;
    /// again on every change to DIR, until Ctrl-C. A running `serve` or
    /// `chat` reloads it. A failed build keeps the installed plugin.
    Dev {
        /// The plugin folder, as `wasmclaw new-plugin NAME` made it.
        #[arg(value_name = "DIR")]
        folder: PathBuf,
    },
}

impl PluginsCommand {
    /// Runs the command with the plugin directory, load bounds and grants
    /// defaults of `config` (`adapter` needs none: the command line writes
    /// it without loading the configuration).
    pub async fn run(&self, home: &Home, config: &Config) -> Result<ExitCode> {
        if let PluginsCommand::Adapter { file } = self {
            write_adapter(file)?;
            return Ok(ExitCode::SUCCESS);
        }
        let dir = config.plugins.dir.as_path();
        let runtime = super::runtime(home, config)?;
        if let PluginsCommand::Dev { folder } = self {
            return super::plugins_dev::run(&runtime, dir, folder).await;
        }
        match self {
            PluginsCommand::List { json } => {
                let plugins = Plugins::load_dir(runtime, dir).await;
                let catalog = plugins.catalog();
                if *json {
                    let list: Vec<_> = catalog.plugins.iter().map(|s| s.info()).collect();
                    println!("{}", serde_json::to_string_pretty(&list)?);
                } else if catalog.plugins.is_empty() {
                    println!("no plugins in {}", dir.display());
                } else {
                    for status in &catalog.plugins {
                        print_status(status);
                    }
                }
                Ok(ExitCode::SUCCESS)
            }
            PluginsCommand::Check { file } => match Plugins::load_file(&runtime, file).await {
                Ok(plugin) => {
                    println!("{}: ok ({})", file.display(), offers(&plugin));
                    Ok(ExitCode::SUCCESS)
                }
                Err(reason) => {
                    eprintln!("{}: {reason}", file.display());
                    Ok(ExitCode::FAILURE)
                }
            },
            PluginsCommand::Install {
                file,
                grants,
                force,
            } => install::run(&runtime, dir, file, grants.as_deref(), *force).await,
            PluginsCommand::Call { json, tool, args } => {
                let plugins = Plugins::load_dir(runtime, dir).await;
                let ctx = CallContext {
                    session_key: "cli".into(),
                    turn_id: "cli".into(),
                    call_id: "call-1".into(),
                    ..Default::default()
                };
                let result = plugins.call(&ctx, tool, args).await;
                match (*json, result) {
                    (true, Ok(output)) => {
                        println!("{}", serde_json::json!({ "ok": output }));
                        Ok(ExitCode::SUCCESS)
                    }
                    (true, Err(e)) => {
                        println!("{}", serde_json::json!({ "error": e }));
                        Ok(ExitCode::FAILURE)
                    }
                    (false, Ok(output)) => {
                        println!("{output}");
                        Ok(ExitCode::SUCCESS)
                    }
                    (false, Err(e)) => {
                        eprintln!("error: {e}");
                        Ok(ExitCode::FAILURE)
                    }
                }
            }
            PluginsCommand::Adapter { .. } => unreachable!("handled before the runtime starts"),
            PluginsCommand::Dev { .. } => unreachable!("handled once the runtime starts"),
        }
    }
}

/// The adapter's bytes, as `wasmtime` 48.0.8 ships them.
pub const REACTOR_ADAPTER: &[u8] =
    wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER;

pub fn write_adapter(file: &Path) -> Result<()> {
    if let Some(parent) = file.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(file, REACTOR_ADAPTER).with_context(|| format!("writing {}", file.display()))
}

/// `tool-plugin@0.2.0; tools: a, b; hooks: ...`.
pub(super) fn offers(plugin: &Plugin) -> String {
    let tools: Vec<&str> = plugin.tools.iter().map(|t| t.name.as_str()).collect();
    let hooks: Vec<String> = plugin.subscriptions.iter().map(|s| s.to_string()).collect();
    let mut offers = vec![format!("{}@{}", plugin.world, plugin.wit_version)];
    if !tools.is_empty() {
        offers.push(format!("tools: {}", tools.join(", ")));
    }
    if !hooks.is_empty() {
        offers.push(format!("hooks: {}", hooks.join(", ")));
    }
    offers.join("; ")
}

fn print_status(status: &PluginStatus) {
    match status {
        PluginStatus::Failed { file, error, .. } => {
            println!("{}  error: {error}", file_name(file));
        }
        PluginStatus::Loaded(p) => {
            let g = &p.grants;
            let mut grants = Vec::new();
            for d in &g.dirs {
                let mode = match d.mode {
                    DirMode::ReadOnly => "ro",
                    DirMode::ReadWrite => "rw",
                };
                grants.push(format!("dir {} -> {} ({mode})", d.host.display(), d.guest));
            }
            if !g.env.is_empty() {
                grants.push(format!("env {}", g.env.join(",")));
            }
            if !g.network.allow.is_empty() {
                let origins: Vec<&str> =
                    g.network.allow.iter().map(|o| o.written.as_str()).collect();
                grants.push(format!("net {}", origins.join(",")));
            }
            for c in &g.network.credentials {
                grants.push(format!("secret {} -> {}", c.secret, c.host));
            }
            let grants = if grants.is_empty() {
                "none".to_string()
            } else {
                grants.join("; ")
            };
            let mut budgets = Vec::new();
            if !p.tools.is_empty() {
                budgets.push(format!(
                    "limits: {} memory, {} per call, {} output, {} log lines",
                    size(g.limits.memory_bytes),
                    duration(g.limits.timeout),
                    size(g.limits.output_bytes as u64),
                    g.limits.log_lines,
                ));
            }
            if !p.subscriptions.is_empty() {
                let fail = match g.hooks.fail {
                    Some(FailMode::Closed) => ", fails closed",
                    Some(FailMode::Open) => ", fails open",
                    None => "",
                };
                budgets.push(format!(
                    "hook budget: {} memory, {} per call{fail}",
                    size(g.hooks.memory_bytes),
                    duration(g.hooks.timeout),
                ));
            }
            println!(
                "{}  ok  {}@{}  grants: {grants}  {}",
                file_name(&p.path),
                p.world,
                p.wit_version,
                budgets.join("  "),
            );
            for t in &p.tools {
                let first_line = t.description.lines().next().unwrap_or("");
                let short = &first_line[..first_line.floor_char_boundary(90)];
                let more = if short.len() < first_line.len() {
                    "…"
                } else {
                    ""
                };
                println!("    {:<20} {short}{more}", t.name);
            }
            for hook in &p.subscriptions {
                println!("    hook {hook}");
            }
        }
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}
