//! `wasmclaw config check` and `wasmclaw config show`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;

use crate::config::overrides::{AgentFlags, PluginFlags, ServerFlags};
use crate::config::{Overrides, process_env, show};
use crate::home::Home;

#[derive(Subcommand, Debug)]
pub enum ConfigCommand {
    /// Exit 0 and `FILE: ok (N agents, M providers)` if the configuration
    /// loads (FILE, or the one every command reads); else every fault, one
    /// a line (FILE:LINE:COLUMN: KEY: what is wrong), and exit 1.
    Check { file: Option<PathBuf> },
    /// The effective configuration: every value, with where it came from
    /// (flag, environment, file and position, or default). Keys are never
    /// shown: the variable that holds one, and whether it is set.
    Show(Box<ShowArgs>),
}

#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    /// As JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    agent: AgentFlags,
    #[command(flatten)]
    server: ServerFlags,
}

impl ConfigCommand {
    pub fn run(
        &self,
        home: &Home,
        explicit: Option<&Path>,
        plugins: &PluginFlags,
    ) -> Result<ExitCode> {
        let mut overrides = Overrides {
            plugins: plugins.clone(),
            ..Overrides::default()
        };
        match self {
            ConfigCommand::Check { file } => {
                let explicit = file.as_deref().or(explicit);
                let (path, _) = crate::config::file_path(home, explicit);
                match crate::config::load(home, explicit, &overrides, &process_env) {
                    Ok(config) => {
                        let counts = format!(
                            "{} agent{}, {} providers",
                            config.agents.len(),
                            if config.agents.len() == 1 { "" } else { "s" },
                            config.providers.len()
                        );
                        match &config.file {
                            Some(file) => println!("{}: ok ({counts})", file.display()),
                            None => println!(
                                "{}: not found; the built-in defaults apply ({counts})",
                                path.display()
                            ),
                        }
                        Ok(ExitCode::SUCCESS)
                    }
                    Err(errors) => {
                        for error in &errors.0 {
                            eprintln!("{error}");
                        }
                        Ok(ExitCode::FAILURE)
                    }
                }
            }
            ConfigCommand::Show(show) => {
                let ShowArgs {
                    json,
                    agent,
                    server,
                } = show.as_ref();
                overrides.agent = agent.clone();
                overrides.server = server.clone();
                let config = crate::config::load(home, explicit, &overrides, &process_env)?;
                if *json {
                    let value = show::json(&config, &process_env);
                    println!("{}", serde_json::to_string_pretty(&value)?);
                } else {
                    print!("{}", show::text(&config, &process_env));
                }
                Ok(ExitCode::SUCCESS)
            }
        }
    }
}
