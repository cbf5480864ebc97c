//! Which environment variables a grant's `env` may pass through to a
//! plugin: any but the host's own. Those are its settings (`WASMCLAW_*`:
//! the home, the model, the API token, the secrets) and the variables the
//! model providers read ([`crate::llm::PROVIDER_ENV`]: their keys and
//! URLs), whose values a plugin must never read, and the variables the
//! configuration names for the keys of its providers and the API token
//! (`api_key_env`, `token_env`). A plugin that needs a key gets a
//! credential, which the host adds to its requests.

/// An environment variable a plugin may be given: not one of the host's
/// own (its settings, the providers' keys and URLs, the secrets), whose
/// values a plugin must never read; nor one of `host_env`, the variables
/// the configuration names for its keys. Names are compared in upper case.
pub(super) fn check(name: &str, host_env: &[String]) -> Result<(), String> {
    if name.is_empty() || name.contains('=') || name.contains('\0') {
        return Err(format!("{name:?} is not an environment variable name"));
    }
    let upper = name.to_ascii_uppercase();
    if upper.starts_with(super::secrets::ENV_PREFIX) {
        return Err(format!(
            "{name:?} holds a secret, which a plugin never gets; name it in [[credentials]] instead"
        ));
    }
    let own = if upper.starts_with(crate::home::ENV_PREFIX) {
        Some("one of wasmclaw's own settings")
    } else if crate::llm::PROVIDER_ENV.contains(&upper.as_str()) {
        Some("the host's model provider setting")
    } else if host_env.iter().any(|v| v.eq_ignore_ascii_case(name)) {
        Some("a key the host's configuration reads (api_key_env or token_env)")
    } else {
        None
    };
    match own {
        Some(what) => Err(format!(
            "{name:?} is {what}, which a plugin never gets; to let the plugin call an API with a key, put the key in a secret and name it in [[credentials]] instead"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_own_variables_cannot_be_granted() {
        let credential = "which a plugin never gets; to let the plugin call an API with a key, put the key in a secret and name it in [[credentials]] instead";
        for (name, what) in [
            ("OPENAI_API_KEY", "the host's model provider setting"),
            ("anthropic_api_key", "the host's model provider setting"),
            ("OPENAI_BASE_URL", "the host's model provider setting"),
            ("ANTHROPIC_BASE_URL", "the host's model provider setting"),
            ("WASMCLAW_API_TOKEN", "one of wasmclaw's own settings"),
            ("WASMCLAW_HOME", "one of wasmclaw's own settings"),
            ("WASMCLAW_MODEL", "one of wasmclaw's own settings"),
        ] {
            assert_eq!(
                check(name, &[]).unwrap_err(),
                format!("\"{name}\" is {what}, {credential}")
            );
        }
        assert_eq!(check("TZ", &[]), Ok(()));
        assert_eq!(check("LANG", &[]), Ok(()));
        let named = ["LOCAL_LLM_KEY".to_string()];
        assert_eq!(check("TZ", &named), Ok(()));
        assert_eq!(
            check("local_llm_key", &named).unwrap_err(),
            format!(
                "\"local_llm_key\" is a key the host's configuration reads (api_key_env or token_env), {credential}"
            )
        );
        assert_eq!(
            check("A=B", &[]).unwrap_err(),
            "\"A=B\" is not an environment variable name"
        );
    }
}
