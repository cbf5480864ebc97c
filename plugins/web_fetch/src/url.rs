//! Just enough of RFC 3986 for fetching pages: absolute http(s) URLs, split
//! into the parts a `wasi:http` request needs, and references (a redirect's
//! `Location`) resolved against them.

use std::fmt;

/// An absolute `http` or `https` URL without its fragment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// `http` or `https`.
    pub scheme: String,
    /// `host[:port]`, the host in lower case.
    pub authority: String,
    /// The path (starting with `/`, dot segments removed) and the query,
    /// with spaces, controls and non-ASCII characters percent-encoded.
    pub path_and_query: String,
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}://{}{}",
            self.scheme, self.authority, self.path_and_query
        )
    }
}

impl Url {
    /// An absolute URL such as `https://example.com/a/b?c`.
    pub fn parse(text: &str) -> Result<Url, String> {
        let text = text.trim();
        let Some((scheme, rest)) = split_scheme(text) else {
            return Err(format!(
                "{text:?} is not an absolute URL; expected http://... or https://..."
            ));
        };
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(format!(
                "only http and https URLs can be fetched, not {scheme}: URLs"
            ));
        }
        let Some(rest) = rest.strip_prefix("//") else {
            return Err(format!(
                "{text:?} has no host; expected {scheme}://host/path"
            ));
        };
        let rest = without_fragment(rest);
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path_and_query) = rest.split_at(end);
        let authority = check_authority(authority)?;
        let path_and_query = match path_and_query.chars().next() {
            None => "/".to_string(),
            Some('?') => format!("/{path_and_query}"),
            Some(_) => path_and_query.to_string(),
        };
        Ok(Url {
            scheme,
            authority,
            path_and_query: normalize(&path_and_query),
        })
    }

    /// Resolves `reference` (absolute, `//host/...`, `/path`, `?query`,
    /// `relative/path` or `../path`) against this URL.
    pub fn join(&self, reference: &str) -> Result<Url, String> {
        let reference = reference.trim();
        if split_scheme(reference).is_some() {
            return Url::parse(reference);
        }
        if reference.starts_with("//") {
            return Url::parse(&format!("{}:{reference}", self.scheme));
        }
        let reference = without_fragment(reference);
        let (base_path, _) = split_query(&self.path_and_query);
        let path_and_query = if reference.is_empty() {
            self.path_and_query.clone()
        } else if reference.starts_with('/') {
            reference.to_string()
        } else if reference.starts_with('?') {
            format!("{base_path}{reference}")
        } else {
            let dir = &base_path[..base_path.rfind('/').map_or(0, |i| i + 1)];
            format!("{dir}{reference}")
        };
        Ok(Url {
            scheme: self.scheme.clone(),
            authority: self.authority.clone(),
            path_and_query: normalize(&path_and_query),
        })
    }
}

/// `scheme:rest` when `text` starts with a scheme (a letter, then letters,
/// digits, `+`, `-` or `.`, then `:`).
fn split_scheme(text: &str) -> Option<(&str, &str)> {
    let colon = text.find(':')?;
    let scheme = &text[..colon];
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then(|| (scheme, &text[colon + 1..]))
}

fn without_fragment(text: &str) -> &str {
    text.split('#').next().unwrap_or_default()
}

fn split_query(path_and_query: &str) -> (&str, &str) {
    match path_and_query.find('?') {
        Some(i) => path_and_query.split_at(i),
        None => (path_and_query, ""),
    }
}

/// Checks `host[:port]` and lower-cases the host.
fn check_authority(authority: &str) -> Result<String, String> {
    if authority.is_empty() {
        return Err("the URL has no host".into());
    }
    if authority.contains('@') {
        return Err("URLs with a user name or password are not supported".into());
    }
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (host, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("{authority:?}: an unclosed ["))?;
            if !host
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
            {
                return Err(format!("{authority:?} is not a valid IPv6 host"));
            }
            match after {
                "" => (authority, None),
                _ => match after.strip_prefix(':') {
                    Some(port) => (&authority[..authority.len() - after.len()], Some(port)),
                    None => return Err(format!("{authority:?} is not host[:port]")),
                },
            }
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    if host.is_empty() {
        return Err("the URL has no host".into());
    }
    if !host.is_ascii() {
        return Err(format!(
            "the host {host:?} is not ASCII; write an international name in its xn-- form"
        ));
    }
    if !host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '[' | ']' | ':'))
    {
        return Err(format!("{host:?} is not a valid host name"));
    }
    if let Some(port) = port
        && (port.is_empty() || port.parse::<u16>().is_err())
    {
        return Err(format!("{port:?} is not a port number"));
    }
    Ok(authority.to_ascii_lowercase())
}

/// Removes dot segments from the path and percent-encodes what may not
/// appear in a request target.
fn normalize(path_and_query: &str) -> String {
    let (path, query) = split_query(path_and_query);
    let mut out = encode(&remove_dot_segments(path));
    out.push_str(&encode(query));
    out
}

/// RFC 3986, section 5.2.4, for a path that starts with `/`.
fn remove_dot_segments(path: &str) -> String {
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let mut out: Vec<&str> = Vec::new();
    for (i, segment) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        match *segment {
            "." => {}
            ".." => {
                out.pop();
            }
            other => {
                out.push(other);
                continue;
            }
        }
        if last {
            out.push("");
        }
    }
    format!("/{}", out.join("/"))
}

/// Percent-encodes spaces, controls, non-ASCII characters and the few
/// printable ones a request target may not contain; `%` is left alone.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_graphic()
            && !matches!(c, '"' | '<' | '>' | '\\' | '^' | '`' | '{' | '|' | '}')
        {
            out.push(c);
        } else {
            let mut buf = [0; 4];
            for byte in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{byte:02X}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    #[test]
    fn parses_absolute_urls() {
        let u = url("https://En.Wikipedia.org/wiki/Rust?x=1#History");
        assert_eq!(u.scheme, "https");
        assert_eq!(u.authority, "en.wikipedia.org");
        assert_eq!(u.path_and_query, "/wiki/Rust?x=1");
        assert_eq!(u.to_string(), "https://en.wikipedia.org/wiki/Rust?x=1");
        assert_eq!(url("HTTP://example.com").to_string(), "http://example.com/");
        assert_eq!(
            url("http://example.com?q").to_string(),
            "http://example.com/?q"
        );
        assert_eq!(url("http://127.0.0.1:8080/a").authority, "127.0.0.1:8080");
        assert_eq!(url("http://[::1]:8080/a").authority, "[::1]:8080");
        assert_eq!(url("http://[::1]/").authority, "[::1]");
        assert_eq!(
            url("  https://example.com/a/./b/../c  ").path_and_query,
            "/a/c"
        );
    }

    #[test]
    fn encodes_what_a_request_target_may_not_hold() {
        assert_eq!(
            url("https://example.com/a b/é?q=x y|z").path_and_query,
            "/a%20b/%C3%A9?q=x%20y%7Cz"
        );
        assert_eq!(url("https://example.com/a%20b").path_and_query, "/a%20b");
    }

    #[test]
    fn refuses_what_cannot_be_fetched() {
        for bad in [
            "ftp://example.com/x",
            "file:///etc/passwd",
            "javascript:alert(1)",
            "example.com/page",
            "/relative",
            "https://",
            "https:///path",
            "https://user:pw@example.com/",
            "https://exa mple.com/",
            "https://bücher.de/",
            "https://example.com:99999/",
            "https://example.com:/",
            "https://[::1/",
        ] {
            assert!(Url::parse(bad).is_err(), "{bad} should be refused");
        }
        let e = Url::parse("ftp://example.com/x").unwrap_err();
        assert!(e.contains("only http and https"), "{e}");
    }

    #[test]
    fn resolves_references_as_rfc_3986_does() {
        // RFC 3986, section 5.4.1, with an http base.
        let base = url("http://a/b/c/d;p?q");
        for (reference, expected) in [
            ("g", "http://a/b/c/g"),
            ("./g", "http://a/b/c/g"),
            ("g/", "http://a/b/c/g/"),
            ("/g", "http://a/g"),
            ("//g", "http://g/"),
            ("?y", "http://a/b/c/d;p?y"),
            ("g?y", "http://a/b/c/g?y"),
            ("#s", "http://a/b/c/d;p?q"),
            ("g#s", "http://a/b/c/g"),
            (";x", "http://a/b/c/;x"),
            ("", "http://a/b/c/d;p?q"),
            (".", "http://a/b/c/"),
            ("./", "http://a/b/c/"),
            ("..", "http://a/b/"),
            ("../", "http://a/b/"),
            ("../g", "http://a/b/g"),
            ("../..", "http://a/"),
            ("../../g", "http://a/g"),
            ("../../../g", "http://a/g"),
            ("/./g", "http://a/g"),
            ("/../g", "http://a/g"),
            ("g.", "http://a/b/c/g."),
            ("..g", "http://a/b/c/..g"),
            ("./../g", "http://a/b/g"),
            ("g/./h", "http://a/b/c/g/h"),
            ("g/../h", "http://a/b/c/h"),
        ] {
            assert_eq!(
                base.join(reference).unwrap().to_string(),
                expected,
                "{reference}"
            );
        }
    }

    #[test]
    fn resolves_redirect_locations() {
        let base = url("https://en.wikipedia.org/wiki/Rust");
        assert_eq!(
            base.join("https://en.m.wikipedia.org/wiki/Rust")
                .unwrap()
                .to_string(),
            "https://en.m.wikipedia.org/wiki/Rust"
        );
        assert_eq!(
            base.join("//www.wikipedia.org/").unwrap().to_string(),
            "https://www.wikipedia.org/"
        );
        assert_eq!(
            base.join("/wiki/Rust_(programming_language)")
                .unwrap()
                .to_string(),
            "https://en.wikipedia.org/wiki/Rust_(programming_language)"
        );
        assert_eq!(
            url("http://x.org").join("next").unwrap().to_string(),
            "http://x.org/next"
        );
        assert!(base.join("ftp://example.com/").is_err());
        assert!(base.join("mailto:someone@example.com").is_err());
    }
}
