//! The host side of the WIT contract in `wit/`: Rust bindings generated once
//! per version of `wasmclaw:plugin` this host loads, and which version a
//! component was built for.
//!
//! - [`v0_2`], aliased [`latest`]: the newest version (`wit/plugin.wit`).
//!   The host works in its types only.
//! - [`v0_1`]: 0.1.0, frozen (`wit/0.1.0/plugin.wit`); its conversions to
//!   the newest types are in [`super::compat::v0_1`].
//!
//! One linker holds the imports of every version ([`super::host::linker`]);
//! the loader reads a component's version from the names it imports and
//! exports ([`WitVersion::of_names`]) and binds its exports with that
//! version's bindings ([`super::exports`]). How to change the contract or
//! start a version: `wit/README.md`.

use serde::Serialize;

pub mod v0_1;
pub mod v0_2;

pub use v0_2 as latest;

pub use latest::exports::wasmclaw::plugin::hooks as wit_hooks;
pub use latest::exports::wasmclaw::plugin::tool as wit_tool;

/// The WIT package of the plugin contract.
pub const WIT_PACKAGE: &str = "wasmclaw:plugin";

/// A version of `wasmclaw:plugin` this host loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WitVersion {
    V0_1,
    V0_2,
}

impl WitVersion {
    /// Every version this host loads, oldest first.
    pub const SUPPORTED: [WitVersion; 2] = [WitVersion::V0_1, WitVersion::V0_2];
    /// The version of `wit/plugin.wit`, which new plugins are built against.
    pub const LATEST: WitVersion = WitVersion::V0_2;

    pub const fn as_str(self) -> &'static str {
        match self {
            WitVersion::V0_1 => "0.1.0",
            WitVersion::V0_2 => "0.2.0",
        }
    }

    /// The version written `version` (exactly: a release is one version).
    pub fn parse(version: &str) -> Option<WitVersion> {
        Self::SUPPORTED.into_iter().find(|v| v.as_str() == version)
    }

    /// The export of tool plugins.
    pub const fn tool_export(self) -> &'static str {
        match self {
            WitVersion::V0_1 => "wasmclaw:plugin/tool@0.1.0",
            WitVersion::V0_2 => "wasmclaw:plugin/tool@0.2.0",
        }
    }

    /// The export of hook plugins.
    pub const fn hooks_export(self) -> &'static str {
        match self {
            WitVersion::V0_1 => "wasmclaw:plugin/hooks@0.1.0",
            WitVersion::V0_2 => "wasmclaw:plugin/hooks@0.2.0",
        }
    }

    /// The version a component was built for, from the names it exports and
    /// imports (looked at in that order): `None` when it names no
    /// `wasmclaw:plugin` interface.
    pub fn of_names<'a>(
        imports: impl IntoIterator<Item = &'a str>,
        exports: impl IntoIterator<Item = &'a str>,
    ) -> Result<Option<WitVersion>, VersionError> {
        let ours = format!("{WIT_PACKAGE}/");
        let named = exports
            .into_iter()
            .map(|name| (Use::Exports, name))
            .chain(imports.into_iter().map(|name| (Use::Imports, name)))
            .filter_map(|(how, name)| {
                let rest = name.strip_prefix(&ours)?;
                let version = rest.split_once('@').map_or("", |(_, v)| v);
                Some((how, name, version))
            });
        let mut first: Option<(Use, &str, WitVersion)> = None;
        for (how, name, version) in named {
            let Some(version) = WitVersion::parse(version) else {
                return Err(VersionError::Unsupported {
                    found: version.to_string(),
                    named: format!("{how} {name}"),
                });
            };
            match first {
                None => first = Some((how, name, version)),
                Some((first_how, first_name, seen)) if seen != version => {
                    return Err(VersionError::Mixed {
                        first: (seen, format!("{first_how} {first_name}")),
                        second: (version, format!("{how} {name}")),
                    });
                }
                Some(_) => {}
            }
        }
        Ok(first.map(|(_, _, version)| version))
    }
}

impl std::fmt::Display for WitVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for WitVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The supported versions in words: `0.1.0 and 0.2.0`.
pub fn supported_versions() -> String {
    let all: Vec<&str> = WitVersion::SUPPORTED.iter().map(|v| v.as_str()).collect();
    match all.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// How a component names an interface.
#[derive(Debug, Clone, Copy)]
enum Use {
    Imports,
    Exports,
}

impl std::fmt::Display for Use {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Use::Imports => "it imports",
            Use::Exports => "it exports",
        })
    }
}

/// A component built for no version this host loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionError {
    /// A version this host does not know; `named` says where it was seen.
    Unsupported { found: String, named: String },
    /// Two versions in one component, each with where it was seen.
    Mixed {
        first: (WitVersion, String),
        second: (WitVersion, String),
    },
}

impl VersionError {
    /// The reason, naming `plugin`.
    pub fn describe(&self, plugin: &str) -> String {
        let supported = supported_versions();
        let newest = WitVersion::LATEST;
        match self {
            VersionError::Unsupported { found, named } => {
                let found = if found.is_empty() {
                    format!("{WIT_PACKAGE} without a version")
                } else {
                    format!("{WIT_PACKAGE}@{found}")
                };
                format!(
                    "plugin '{plugin}' was built for {found} ({named}), which this host does not load; it loads {WIT_PACKAGE} {supported}: rebuild the plugin against one of them (wit/plugin.wit is {newest})"
                )
            }
            VersionError::Mixed {
                first: (a, a_named),
                second: (b, b_named),
            } => format!(
                "plugin '{plugin}' mixes two versions of {WIT_PACKAGE}: {a} ({a_named}) and {b} ({b_named}); a plugin is built against one version: rebuild it against one of them (wit/plugin.wit is {newest})"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(imports: &[&str], exports: &[&str]) -> Result<Option<WitVersion>, String> {
        WitVersion::of_names(imports.iter().copied(), exports.iter().copied())
            .map_err(|e| e.describe("p"))
    }

    #[test]
    fn the_version_is_the_one_every_plugin_interface_names() {
        let wasi = "wasi:cli/environment@0.2.6";
        assert_eq!(
            of(
                &[
                    wasi,
                    "wasmclaw:plugin/types@0.1.0",
                    "wasmclaw:plugin/log@0.1.0"
                ],
                &["wasmclaw:plugin/tool@0.1.0"]
            ),
            Ok(Some(WitVersion::V0_1))
        );
        assert_eq!(
            of(&[wasi], &["wasmclaw:plugin/hooks@0.2.0"]),
            Ok(Some(WitVersion::V0_2))
        );
        assert_eq!(of(&[wasi], &["my:own/thing@1.0.0"]), Ok(None));
    }

    #[test]
    fn an_unknown_version_is_named_with_the_versions_this_host_loads() {
        assert_eq!(
            of(&[], &["wasmclaw:plugin/tool@1.0.0"]),
            Err("plugin 'p' was built for wasmclaw:plugin@1.0.0 (it exports wasmclaw:plugin/tool@1.0.0), which this host does not load; it loads wasmclaw:plugin 0.1.0 and 0.2.0: rebuild the plugin against one of them (wit/plugin.wit is 0.2.0)".into())
        );
        // A patch release of 0.1 was never made: it is not 0.1.0.
        assert_eq!(
            of(&["wasmclaw:plugin/log@0.1.1"], &[]),
            Err("plugin 'p' was built for wasmclaw:plugin@0.1.1 (it imports wasmclaw:plugin/log@0.1.1), which this host does not load; it loads wasmclaw:plugin 0.1.0 and 0.2.0: rebuild the plugin against one of them (wit/plugin.wit is 0.2.0)".into())
        );
        assert_eq!(
            of(&[], &["wasmclaw:plugin/tool"]),
            Err("plugin 'p' was built for wasmclaw:plugin without a version (it exports wasmclaw:plugin/tool), which this host does not load; it loads wasmclaw:plugin 0.1.0 and 0.2.0: rebuild the plugin against one of them (wit/plugin.wit is 0.2.0)".into())
        );
    }

    #[test]
    fn two_versions_in_one_component_are_refused_naming_both() {
        assert_eq!(
            of(
                &["wasmclaw:plugin/log@0.1.0"],
                &["wasmclaw:plugin/tool@0.2.0"]
            ),
            Err("plugin 'p' mixes two versions of wasmclaw:plugin: 0.2.0 (it exports wasmclaw:plugin/tool@0.2.0) and 0.1.0 (it imports wasmclaw:plugin/log@0.1.0); a plugin is built against one version: rebuild it against one of them (wit/plugin.wit is 0.2.0)".into())
        );
    }

    /// `wit/plugin.wit` is the newest version, and each older one is kept
    /// in `wit/VERSION/plugin.wit`.
    #[test]
    fn the_wit_files_are_the_versions_this_host_loads() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
        for v in WitVersion::SUPPORTED {
            let file = if v == WitVersion::LATEST {
                root.join("plugin.wit")
            } else {
                root.join(v.as_str()).join("plugin.wit")
            };
            let wit = std::fs::read_to_string(&file).unwrap();
            assert!(
                wit.starts_with(&format!("package {WIT_PACKAGE}@{v};\n")),
                "{}",
                file.display()
            );
        }
    }

    /// A released version's file never changes: plugins were built
    /// against it. (Its SHA-256, taken when it was released.)
    #[test]
    fn released_versions_are_frozen() {
        use sha2::{Digest, Sha256};
        let released = [(
            WitVersion::V0_1,
            "57447fb7c46740378326cc40c49304657001b244aab3771cb561bf45f79fbac7",
        )];
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
        for (version, sha256) in released {
            let file = root.join(version.as_str()).join("plugin.wit");
            let digest: String = Sha256::digest(std::fs::read(&file).unwrap())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(
                digest,
                sha256,
                "{} is released and frozen: change wit/plugin.wit instead (see wit/README.md)",
                file.display()
            );
        }
    }

    #[test]
    fn each_version_names_its_own_exports() {
        for v in WitVersion::SUPPORTED {
            assert_eq!(v.tool_export(), format!("wasmclaw:plugin/tool@{v}"));
            assert_eq!(v.hooks_export(), format!("wasmclaw:plugin/hooks@{v}"));
            assert_eq!(WitVersion::parse(v.as_str()), Some(v));
        }
        assert_eq!(WitVersion::SUPPORTED.last(), Some(&WitVersion::LATEST));
    }
}
