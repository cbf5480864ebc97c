//! The file `wasmclaw init` writes: every table and key, each commented
//! out at its built-in default with a line that says what it does. A line
//! `#key = value` or `#[table]` is a setting; `# ` starts a note or an
//! example (a key with no default). A test holds the template, uncommented,
//! against the built-in defaults, so the two cannot drift apart.

/// The commented file.
pub const TEMPLATE: &str = include_str!("wasmclaw.toml");

/// The template with every setting's `#` taken off (notes and examples
/// stay comments).
pub fn uncommented() -> String {
    TEMPLATE
        .lines()
        .map(|line| match line.strip_prefix('#') {
            Some(rest) if rest.starts_with(|c: char| c.is_ascii_alphabetic() || c == '[') => rest,
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Overrides, Source, load};
    use crate::home::Home;

    #[test]
    fn the_template_uncommented_resolves_to_the_built_in_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        let no_env = |_: &str| None;
        let defaults = load(&home, None, &Overrides::default(), &no_env).unwrap();
        assert_eq!(defaults.file, None);

        std::fs::write(home.config_file(), uncommented()).unwrap();
        let written = load(&home, None, &Overrides::default(), &no_env).unwrap();
        assert_eq!(written.file, Some(home.config_file()));
        assert_eq!(written.entries(), defaults.entries());
        assert!(defaults.diff(&written).is_empty());

        // Every value with a default is in the template: all come from the
        // file but the agent run (a flag's or variable's alone) and the
        // built-in scripted provider (which a table would replace).
        let from_default: Vec<String> = (written.entries().iter())
            .map(|e| e.path())
            .filter(|path| *written.sources.get(path) == Source::Default)
            .filter(|path| path != "default_agent" && !path.starts_with("providers.scripted."))
            // No default: ollama sends no key.
            .filter(|path| path != "providers.ollama.api_key_env")
            // Its default depends on the command.
            .filter(|path| path != "plugins.max_instances")
            .collect();
        assert_eq!(from_default, Vec::<String>::new());
        // The keys without a default are there as examples.
        for example in [
            "# system_prompt = ",
            "# system_prompt_file = ",
            "# max_tokens = ",
            "# token_budget = ",
            "# fail = ",
            "# headers = ",
            "# context_window = ",
            "# max_output_tokens = ",
        ] {
            assert!(TEMPLATE.contains(example), "{example}");
        }
    }
}
