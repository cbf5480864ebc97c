//! `wasmclaw completions SHELL` and `wasmclaw man`: the shell completion
//! script and the man page, generated from the command line's own
//! definition, so neither can drift from it.

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;

use super::Cli;

/// The completion script of `shell`.
pub fn completions(shell: Shell) -> String {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "wasmclaw", &mut script);
    String::from_utf8_lossy(&script).into_owned()
}

/// The man page, in roff.
pub fn man() -> Result<String> {
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut page)
        .context("rendering the man page")?;
    Ok(String::from_utf8_lossy(&page).into_owned())
}
