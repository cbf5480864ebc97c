//! The `wasmclaw` command line. This is a front end: it may print.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod agent;
mod approvals;
mod chat;
mod completions;
mod config_cmd;
mod init;
mod mcp;
mod new_plugin;
mod plugins;
mod plugins_dev;
mod progress;
mod run;
mod serve;
mod term;
mod turns;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use clap::{Parser, Subcommand};

use crate::config::overrides::{AgentFlags, PluginFlags, ServerFlags};
use crate::config::watch::Loader;
use crate::config::{Config, Overrides};
use crate::home::Home;
use crate::plugin::policy::protected::Protected;
use crate::plugin::policy::secrets::Secrets;
use crate::plugin::sandbox::cache::Compiler;
use crate::plugin::{Runtime, RuntimeConfig};

#[derive(Parser, Debug)]
#[command(
    name = "wasmclaw",
    version,
    about = "An LLM agent host whose tools are sandboxed WebAssembly components"
)]
pub struct Cli {
    /// wasmclaw's folder (configuration, plugins, cache); default ~/.wasmclaw.
    #[arg(long, global = true, env = crate::home::HOME_VAR, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// The configuration file, which must exist; default HOME/wasmclaw.toml
    /// when it exists.
    #[arg(long, global = true, env = crate::config::overrides::CONFIG_VAR, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// More log output (-v: info, -vv: debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(flatten)]
    pub plugins: PluginFlags,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run one turn: the answer streams to stdout; exit 1 if the turn
    /// fails.
    Run(run::RunArgs),
    /// A conversation on the terminal, streamed, with tool calls shown.
    /// Typing while a turn runs steers it; Ctrl-C once winds the turn down,
    /// twice stops it.
    Chat {
        #[command(flatten)]
        agent: agent::AgentArgs,
        /// Read input while a turn runs, so a line steers it (the default
        /// when input is a terminal; piped input is one line per turn).
        #[arg(long)]
        live: bool,
    },
    /// The HTTP API: sessions, a live event stream (SSE), OpenAI-compatible
    /// chat completions, metrics. Stops on SIGINT or SIGTERM, letting
    /// running turns wind down.
    Serve(serve::ServeArgs),
    /// MCP: serve the agent's tools to an MCP client on stdin and stdout;
    /// `mcp list`: the MCP servers whose tools the agents use.
    Mcp(mcp::McpArgs),
    /// The turns of a session, SubTurns under their parents, as recorded.
    Turns {
        /// The session key.
        #[arg(long, value_name = "KEY")]
        session: String,
        /// Every field of every turn, as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Create a plugin folder from a template: it builds with `./build.sh`
    /// and loads as it is.
    NewPlugin {
        /// The plugin's language.
        #[arg(long, value_enum)]
        lang: new_plugin::Lang,
        /// What it offers: tools (every language) or hooks (rust, python).
        #[arg(long, value_enum, default_value_t)]
        kind: new_plugin::Kind,
        /// The plugin's name: lower-case letters, digits and _.
        name: String,
        /// Where to create the folder NAME.
        #[arg(long, value_name = "DIR", default_value = ".")]
        dir: PathBuf,
    },
    /// The approval decisions kept beyond one tool call.
    #[command(subcommand)]
    Approvals(approvals::ApprovalsCommand),
    /// Create the home (plugins, cache) and a commented wasmclaw.toml with
    /// every setting at its default.
    Init {
        /// Write the file even if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Check the configuration, or show every value and where it came from.
    #[command(subcommand)]
    Config(config_cmd::ConfigCommand),
    /// Inspect, check, install and call plugins.
    #[command(subcommand)]
    Plugins(plugins::PluginsCommand),
    /// Print the completion script of SHELL: e.g. `wasmclaw completions
    /// bash > ~/.local/share/bash-completion/completions/wasmclaw`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): e.g. `wasmclaw man | man -l -`.
    Man,
    /// Compiles a component read from stdin into the cache format (used by
    /// the host itself, so compiler memory does not stay in the host).
    #[command(hide = true)]
    CompilePlugin {
        #[arg(long)]
        out: PathBuf,
        /// The compiler's own memory limit.
        #[arg(long)]
        memory_bytes: u64,
        /// The largest component it reads.
        #[arg(long)]
        max_input_bytes: u64,
    },
}

impl Cli {
    pub async fn run(self) -> Result<ExitCode> {
        let home = self
            .home
            .clone()
            .map(Home::at)
            .unwrap_or_else(Home::from_env);
        let loader = |agent: Option<&AgentFlags>, server: Option<&ServerFlags>| Loader {
            home: home.clone(),
            explicit: self.config.clone(),
            overrides: Overrides {
                plugins: self.plugins.clone(),
                agent: agent.cloned().unwrap_or_default(),
                server: server.cloned().unwrap_or_default(),
                serving: server.is_some(),
            },
        };
        let load = |agent, server| loader(agent, server).load();
        match &self.command {
            Command::Run(args) => {
                let config = load(Some(&args.agent.flags), None)?;
                run::run(&home, &config, args).await
            }
            Command::Chat { agent, live } => {
                let loader = loader(Some(&agent.flags), None);
                let config = loader.load()?;
                chat::chat(&home, &config, loader, agent, *live, self.verbose).await
            }
            Command::Serve(args) => {
                let loader = loader(Some(&args.agent), Some(&args.server));
                let config = loader.load()?;
                serve::serve(&home, &config, loader, args).await
            }
            Command::Mcp(args) => match &args.command {
                Some(mcp::McpCommand::List(list)) => {
                    mcp::list::run(&home, &load(None, None)?, list).await
                }
                None => {
                    let loader = loader(Some(&args.serve.agent), None);
                    let config = loader.load()?;
                    mcp::serve::run(&home, &config, loader, &args.serve).await
                }
            },
            Command::Turns { session, json } => turns::list(&home, session, *json).await,
            Command::Init { force } => init::run(&home, self.config.as_deref(), *force),
            Command::Config(cmd) => cmd.run(&home, self.config.as_deref(), &self.plugins),
            Command::Plugins(plugins::PluginsCommand::Adapter { file }) => {
                plugins::write_adapter(file)?;
                Ok(ExitCode::SUCCESS)
            }
            Command::Plugins(cmd) => cmd.run(&home, &load(None, None)?).await,
            Command::Approvals(cmd) => cmd.run(&home).await,
            Command::NewPlugin {
                lang,
                kind,
                name,
                dir,
            } => {
                new_plugin::run(*lang, *kind, name, dir)?;
                Ok(ExitCode::SUCCESS)
            }
            // Printed whole with `print!`, so a closed pipe ends the
            // process quietly (see `exit_quietly_on_broken_pipe`).
            Command::Completions { shell } => {
                print!("{}", completions::completions(*shell));
                Ok(ExitCode::SUCCESS)
            }
            Command::Man => {
                print!("{}", completions::man()?);
                Ok(ExitCode::SUCCESS)
            }
            Command::CompilePlugin {
                out,
                memory_bytes,
                max_input_bytes,
            } => {
                crate::plugin::sandbox::cache::compile_child(
                    std::io::stdin().lock(),
                    out,
                    *memory_bytes,
                    *max_input_bytes,
                )?;
                Ok(ExitCode::SUCCESS)
            }
        }
    }
}

/// The runtime as the binary uses it: cache under the home folder, bounded
/// as configured, cache misses compiled in a child process bounded by the
/// configuration's load limits and shown on stderr ([`progress`]), the home (and the configuration file) out of every grant's
/// reach, and the configuration's defaults for every grants file.
pub fn runtime(home: &Home, config: &Config) -> Result<Runtime> {
    let compiler = match std::env::current_exe() {
        Ok(exe) => Compiler::Subprocess(exe),
        Err(_) => Compiler::InProcess,
    };
    let secrets = Secrets::load(&home.secrets()).map_err(anyhow::Error::msg)?;
    let mut protected = home.protected();
    protected.extend(config.file.as_ref().map(|file| {
        Protected::new(
            file,
            "the configuration file",
            "it sets what every plugin may reach",
        )
    }));
    Runtime::new(RuntimeConfig {
        cache_dir: Some(home.cache_dir()),
        cache_max_bytes: config.plugins.cache_max_bytes,
        progress: Some(progress::for_stderr()),
        compiler,
        load: config.plugins.load,
        max_instances: config.plugins.max_instances,
        secrets: Arc::new(secrets),
        protected,
        plugin_defaults: config.plugin_defaults(),
        ..RuntimeConfig::default()
    })
}

/// The runtime that serves the network and runs the turns (and writes
/// them to the store, as a rule: see the store's docs). Guest code runs on
/// the plugin pool's threads and the rest of SQLite's work on the blocking
/// pool, so it has half as many worker threads as the machine has cores
/// (at least one): each thread fewer is fewer hand-offs between threads
/// per turn, which is most of a turn's CPU. `TOKIO_WORKER_THREADS` sets
/// another number.
pub fn async_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        builder.worker_threads((cores / 2).max(1));
    }
    builder.enable_all().build()
}

/// Makes a write to a closed pipe (`wasmclaw plugins list | head`) end the
/// process quietly, with success: the reader has taken what it wanted. Every
/// `print!`, `println!` and `eprintln!` of the command line reports such a
/// write by panicking with "failed printing to stdout: Broken pipe"; this
/// hook, installed once at the start, turns that panic into an exit, for
/// every output path at once, and leaves every other panic to the default
/// hook.
pub fn exit_quietly_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info.payload_as_str().unwrap_or_default();
        if message.starts_with("failed printing to std") && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}

/// Log to stderr, in colour only on a terminal without `NO_COLOR`; plugin
/// output is at info under the `plugin` target, and so are the plugins a
/// watch loads, fails on or removes (`plugins`).
pub fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn,plugin=info,plugins=info",
        1 => "info,plugin=info,wasmtime=warn,cranelift=warn",
        _ => "debug,wasmtime=info,cranelift=info",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(term::colour(&std::io::stderr()))
        .with_target(false)
        .init();
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use clap::CommandFactory;

    use super::*;
    use crate::plugin::Grants;

    fn env_vars(command: &clap::Command, out: &mut Vec<String>) {
        for arg in command.get_arguments() {
            out.extend(arg.get_env().map(|v| v.to_string_lossy().into_owned()));
        }
        for sub in command.get_subcommands() {
            env_vars(sub, out);
        }
    }

    /// Every variable the command line and the providers read is one that no
    /// grant may pass to a plugin: a new one cannot be missed.
    #[test]
    fn no_grant_may_pass_a_variable_the_host_reads() {
        let mut names = Vec::new();
        env_vars(&Cli::command(), &mut names);
        names.extend(crate::llm::PROVIDER_ENV.map(String::from));
        names.extend(crate::config::overrides::ENV.map(String::from));
        for expected in ["WASMCLAW_HOME", "WASMCLAW_MODEL", "WASMCLAW_API_TOKEN"] {
            assert!(names.iter().any(|n| n == expected), "{names:?}");
        }
        for name in names {
            let err = Grants::parse(
                &format!("env = [{name:?}]\n"),
                Path::new("/p/x.toml"),
                &[],
                &Secrets::default(),
                &Default::default(),
            )
            .unwrap_err();
            assert!(err.contains("which a plugin never gets"), "{name}: {err}");
        }
    }
}
