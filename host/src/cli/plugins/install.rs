//! `wasmclaw plugins install FILE.wasm [GRANTS.toml]`: the checks of
//! `plugins check`, with the grants the plugin is to have, then the copy
//! into the plugin directory ([`crate::plugin::install`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::plugin::install::{destination, install_plugin, refuse_existing};
use crate::plugin::loader::Plugin;
use crate::plugin::policy::protected::Protected;
use crate::plugin::{Grants, Plugins, Runtime};

/// Installs `file` into `dir`: its grants are `grants`, or the file's own
/// grants file (FILE.toml beside it) when there is one. Nothing is copied
/// unless the plugin loads with them.
pub async fn run(
    runtime: &Runtime,
    dir: &Path,
    file: &Path,
    grants: Option<&Path>,
    force: bool,
) -> Result<ExitCode> {
    refuse_existing(dir, file, force)?;
    let sidecar = Grants::sidecar_of(file);
    let grants: Option<PathBuf> = match grants {
        Some(grants) => Some(grants.to_path_buf()),
        None => sidecar.is_file().then_some(sidecar),
    };
    let plugin = match check(runtime, dir, file, grants.as_deref()).await? {
        Ok(plugin) => plugin,
        Err(reason) => {
            eprintln!("{reason}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let done = install_plugin(dir, file, grants.as_deref(), force)?;
    let verb = if done.replaced {
        "replaced"
    } else {
        "installed"
    };
    println!(
        "{verb} {} ({})",
        done.wasm.display(),
        super::offers(&plugin)
    );
    match (&done.grants, done.removed_grants) {
        (Some(path), _) => println!("grants: {}", path.display()),
        (None, true) => println!("grants: none (the old grants file was removed)"),
        (None, false) => println!("grants: none"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Loads `file` with `grants` as they will be once both are installed in
/// `dir`; the inner error is the reason, naming the file at fault.
pub async fn check(
    runtime: &Runtime,
    dir: &Path,
    file: &Path,
    grants: Option<&Path>,
) -> Result<Result<Plugin, String>> {
    let (_, to_grants) = destination(dir, file)?;
    let granted = match as_installed(runtime, dir, grants, &to_grants)? {
        Ok(granted) => granted,
        Err(reason) => return Ok(Err(reason)),
    };
    Ok(Plugins::load_file_with_grants(runtime, file, granted)
        .await
        .map_err(|reason| format!("{}: {reason}", file.display())))
}

/// The grants file `from` as it will be once installed as `to` (relative
/// directories are taken from the plugin directory, which no grant may
/// reach); no file is no capabilities. The inner error is the reason,
/// naming `from`.
fn as_installed(
    runtime: &Runtime,
    dir: &Path,
    from: Option<&Path>,
    to: &Path,
) -> Result<Result<Grants, String>> {
    let text = match from {
        Some(from) => std::fs::read_to_string(from)
            .with_context(|| format!("cannot read the grants file {}", from.display()))?,
        None => String::new(),
    };
    let mut protected = runtime.protected().to_vec();
    protected.push(Protected::plugin_dir(dir));
    let parsed = Grants::parse(
        &text,
        to,
        &protected,
        runtime.secrets(),
        runtime.plugin_defaults(),
    );
    Ok(parsed.map_err(|e| {
        let from = from.unwrap_or(to);
        let reason = e.strip_prefix(&format!("{}: ", to.display())).unwrap_or(&e);
        format!("{}: {reason}", from.display())
    }))
}
