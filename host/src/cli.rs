//! The `wasmclaw` command line. This is a front end: it may print.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod agent;
mod chat;
mod new_plugin;
mod plugins;
mod serve;
mod turns;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use clap::{Parser, Subcommand};

use crate::home::Home;
use crate::plugin::policy::secrets::Secrets;
use crate::plugin::sandbox::cache::{Compiler, LoadLimits};
use crate::plugin::{Runtime, RuntimeConfig};

#[derive(Parser, Debug)]
#[command(
    name = "wasmclaw",
    version,
    about = "An LLM agent host whose tools are sandboxed WebAssembly components"
)]
pub struct Cli {
    /// wasmclaw's folder (plugins, cache); default ~/.wasmclaw.
    #[arg(long, global = true, env = crate::home::HOME_VAR, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// The plugin directory; default HOME/plugins.
    #[arg(long, global = true, value_name = "DIR")]
    pub plugins: Option<PathBuf>,
    /// More log output (-v: info, -vv: debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(flatten)]
    pub load: LoadArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run one turn: the answer on stdout; exit 1 if the turn fails.
    Run {
        #[command(flatten)]
        agent: agent::AgentArgs,
        /// Print every event as a JSON line on stderr.
        #[arg(long)]
        events: bool,
        /// The user message.
        #[arg(short, long)]
        message: String,
    },
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
        /// The plugin's name: lower-case letters, digits and _.
        name: String,
        /// Where to create the folder NAME.
        #[arg(long, value_name = "DIR", default_value = ".")]
        dir: PathBuf,
    },
    /// Inspect, check and call plugins.
    #[command(subcommand)]
    Plugins(plugins::PluginsCommand),
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

/// The bounds on loading a plugin file.
#[derive(clap::Args, Debug, Clone)]
pub struct LoadArgs {
    /// Largest plugin file loaded, in MiB; a larger one is refused before
    /// it is read.
    #[arg(long, global = true, env = "WASMCLAW_MAX_PLUGIN_MIB", value_name = "MIB",
          default_value_t = crate::plugin::sandbox::cache::MAX_PLUGIN_FILE >> 20)]
    pub max_plugin_mib: u64,
    /// Longest the compilation of one plugin may take.
    #[arg(long, global = true, env = "WASMCLAW_COMPILE_TIMEOUT", value_name = "SECONDS",
          default_value_t = crate::plugin::sandbox::cache::COMPILE_TIMEOUT.as_secs_f64())]
    pub compile_timeout: f64,
    /// Memory the compilation of one plugin may take, in MiB.
    #[arg(long, global = true, env = "WASMCLAW_COMPILE_MEMORY_MIB", value_name = "MIB",
          default_value_t = crate::plugin::sandbox::cache::COMPILE_MEMORY >> 20)]
    pub compile_memory_mib: u64,
    /// Plugin instances alive at once (every call in flight, tools and
    /// hooks, of every session); a call past it fails, retryable. Default:
    /// 1000 for `serve`, 64 otherwise (one session). The engine reserves
    /// their slots at start, so fewer start faster.
    #[arg(long, global = true, env = "WASMCLAW_MAX_INSTANCES", value_name = "N")]
    pub max_instances: Option<u32>,
}

/// Plugin instances `serve` allows at once by default: many sessions.
pub const SERVE_INSTANCES: u32 = 1000;
/// Plugin instances the other commands allow at once by default: one
/// session's turn, its tool calls (8 at a time) and a few SubTurns'.
pub const SESSION_INSTANCES: u32 = 64;

/// How the plugin runtime is set up from the command line.
#[derive(Debug, Clone, Copy)]
pub struct RuntimeLimits {
    pub load: LoadLimits,
    /// Plugin instances alive at once.
    pub instances: u32,
}

impl LoadArgs {
    /// The limits, with `instances` unless `--max-instances` says.
    pub fn runtime_limits(&self, instances: u32) -> Result<RuntimeLimits> {
        if self.max_instances == Some(0) {
            anyhow::bail!("--max-instances must be at least 1");
        }
        Ok(RuntimeLimits {
            load: self.limits()?,
            instances: self.max_instances.unwrap_or(instances),
        })
    }

    pub fn limits(&self) -> Result<LoadLimits> {
        if !(self.compile_timeout > 0.0 && self.compile_timeout.is_finite()) {
            anyhow::bail!("--compile-timeout must be a positive number of seconds");
        }
        if self.max_plugin_mib == 0 || self.compile_memory_mib == 0 {
            anyhow::bail!("--max-plugin-mib and --compile-memory-mib must be at least 1");
        }
        Ok(LoadLimits {
            max_file_bytes: self.max_plugin_mib.saturating_mul(1 << 20),
            compile_timeout: std::time::Duration::from_secs_f64(self.compile_timeout),
            compile_memory_bytes: self.compile_memory_mib.saturating_mul(1 << 20),
        })
    }
}

impl Cli {
    pub async fn run(self) -> Result<ExitCode> {
        let home = self
            .home
            .clone()
            .map(Home::at)
            .unwrap_or_else(Home::from_env);
        let plugin_dir = self.plugins.clone().unwrap_or_else(|| home.plugins_dir());
        let instances = match &self.command {
            Command::Serve(_) => SERVE_INSTANCES,
            _ => SESSION_INSTANCES,
        };
        let load = self.load.runtime_limits(instances)?;
        match self.command {
            Command::Run {
                agent,
                events,
                message,
            } => agent::run(&home, &plugin_dir, load, &agent, events, &message).await,
            Command::Chat { agent, live } => {
                chat::chat(&home, &plugin_dir, load, &agent, live).await
            }
            Command::Serve(args) => serve::serve(&home, &plugin_dir, load, &args).await,
            Command::Turns { session, json } => turns::list(&home, &session, json).await,
            Command::Plugins(cmd) => cmd.run(&home, &plugin_dir, load).await,
            Command::NewPlugin { lang, name, dir } => {
                new_plugin::run(lang, &name, &dir)?;
                Ok(ExitCode::SUCCESS)
            }
            Command::CompilePlugin {
                out,
                memory_bytes,
                max_input_bytes,
            } => {
                crate::plugin::sandbox::cache::compile_child(
                    std::io::stdin().lock(),
                    &out,
                    memory_bytes,
                    max_input_bytes,
                )?;
                Ok(ExitCode::SUCCESS)
            }
        }
    }
}

/// The runtime as the binary uses it: cache under the home folder, cache
/// misses compiled in a child process bounded by `load`, the home out of
/// every grant's reach.
pub fn runtime(home: &Home, limits: RuntimeLimits) -> Result<Runtime> {
    let compiler = match std::env::current_exe() {
        Ok(exe) => Compiler::Subprocess(exe),
        Err(_) => Compiler::InProcess,
    };
    let secrets = Secrets::load(&home.secrets()).map_err(anyhow::Error::msg)?;
    Runtime::new(RuntimeConfig {
        cache_dir: Some(home.cache_dir()),
        compiler,
        load: limits.load,
        max_instances: limits.instances,
        secrets: Arc::new(secrets),
        protected: home.protected(),
        ..RuntimeConfig::default()
    })
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

/// Log to stderr; plugin output is at info under the `plugin` target.
pub fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn,plugin=info",
        1 => "info,plugin=info,wasmtime=warn,cranelift=warn",
        _ => "debug,wasmtime=info,cranelift=info",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
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
        for expected in ["WASMCLAW_HOME", "WASMCLAW_MODEL", "WASMCLAW_API_TOKEN"] {
            assert!(names.iter().any(|n| n == expected), "{names:?}");
        }
        for name in names {
            let err = Grants::parse(
                &format!("env = [{name:?}]\n"),
                Path::new("/p/x.toml"),
                &[],
                &Secrets::default(),
            )
            .unwrap_err();
            assert!(err.contains("which a plugin never gets"), "{name}: {err}");
        }
    }
}
