//! The `[network]` table and `[[credentials]]` of a grants file: the
//! origins a plugin may reach over `wasi:http`, the limits on its requests,
//! and the secrets the host adds to them.
//!
//! ```toml
//! [network]
//! allow = ["https://api.github.com", "https://*.wikipedia.org", "http://127.0.0.1:8080"]
//! max_requests = 20          # per call
//! timeout_ms = 30000         # per request, from connecting to the last byte
//! max_response_kib = 4096    # per response body
//! max_request_kib = 1024     # per request body
//!
//! [[credentials]]
//! secret = "github_token"    # WASMCLAW_SECRET_GITHUB_TOKEN, or secrets.toml in the home
//! host = "api.github.com"
//! header = "authorization"
//! prefix = "Bearer "
//! ```
//!
//! An origin is `scheme://host[:port]`; `*.example.com` matches every
//! subdomain of example.com, not example.com itself. Loopback, private,
//! link-local (cloud metadata) and other internal addresses are refused
//! unless the origin names that address itself (`http://127.0.0.1:8080`;
//! a name, even `localhost`, is not enough: names can be re-pointed).

use std::net::IpAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::fields::{as_millis, check};
use super::secrets::Secrets;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkToml {
    #[serde(default)]
    pub allow: Vec<String>,
    pub max_requests: Option<u64>,
    pub timeout_ms: Option<u64>,
    pub max_response_kib: Option<u64>,
    pub max_request_kib: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialToml {
    pub secret: String,
    pub host: String,
    pub header: String,
    #[serde(default)]
    pub prefix: String,
}

/// A host as an origin names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// This host (a name or an IP address), case-insensitively.
    Exact(String),
    /// Any subdomain of this domain (`*.example.com`).
    Subdomains(String),
}

impl HostPattern {
    fn parse(host: &str) -> Result<HostPattern, String> {
        let host = host.to_ascii_lowercase();
        let (pattern, name) = match host.strip_prefix("*.") {
            Some(domain) => (HostPattern::Subdomains(domain.to_string()), domain),
            None => (HostPattern::Exact(host.clone()), host.as_str()),
        };
        let is_ip = name.parse::<IpAddr>().is_ok();
        let ok = !name.is_empty()
            && (is_ip
                || name.split('.').all(|l| {
                    !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                }));
        if !ok {
            return Err(format!(
                "{host:?} is not a host name, `*.` and a domain, or an IP address"
            ));
        }
        Ok(pattern)
    }

    pub fn matches(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        match self {
            HostPattern::Exact(h) => *h == host,
            HostPattern::Subdomains(domain) => host
                .strip_suffix(domain.as_str())
                .is_some_and(|rest| rest.len() > 1 && rest.ends_with('.')),
        }
    }

    /// Whether the pattern names `ip` itself: only then may an internal
    /// address be reached.
    fn names(&self, ip: IpAddr) -> bool {
        match self {
            HostPattern::Exact(h) => h.parse::<IpAddr>().is_ok_and(|named| named == ip),
            HostPattern::Subdomains(_) => false,
        }
    }
}

/// One origin a plugin may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub https: bool,
    pub host: HostPattern,
    pub port: u16,
    /// As the operator wrote it.
    pub written: String,
}

impl Serialize for Origin {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.written)
    }
}

impl Origin {
    pub fn parse(text: &str) -> Result<Origin, String> {
        let bad = |why: &str| {
            format!(
                "{text:?}: {why}; expected scheme://host[:port], e.g. \"https://api.example.com\""
            )
        };
        let (scheme, rest) = text.split_once("://").ok_or_else(|| bad("no scheme"))?;
        let https = match scheme {
            "https" => true,
            "http" => false,
            _ => return Err(bad("the scheme must be http or https")),
        };
        if rest.contains(['/', '?', '#', '@']) {
            return Err(bad("an origin has no path, query or user"));
        }
        let (host, port) = match rest.strip_prefix('[') {
            Some(v6) => {
                let (host, after) = v6.split_once(']').ok_or_else(|| bad("an unclosed ["))?;
                if !after.is_empty() && !after.starts_with(':') {
                    return Err(bad("only :port may follow ]"));
                }
                (host, after.strip_prefix(':'))
            }
            None => match rest.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (rest, None),
            },
        };
        let port = match port {
            Some(p) => p
                .parse::<u16>()
                .map_err(|_| bad("the port is not a number from 0 to 65535"))?,
            None if https => 443,
            None => 80,
        };
        Ok(Origin {
            https,
            host: HostPattern::parse(host).map_err(|e| bad(&e))?,
            port,
            written: text.to_string(),
        })
    }

    pub fn matches(&self, https: bool, host: &str, port: u16) -> bool {
        self.https == https && self.port == port && self.host.matches(host)
    }

    /// Whether this origin, matching a request, names `ip` itself.
    pub fn names(&self, ip: IpAddr) -> bool {
        self.host.names(ip)
    }
}

/// A secret the host adds, as a header, to requests to `host`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Credential {
    /// The secret's name (never its value).
    pub secret: String,
    #[serde(serialize_with = "host_text")]
    pub host: HostPattern,
    pub header: String,
    pub prefix: String,
}

fn host_text<S: serde::Serializer>(h: &HostPattern, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(h)
}

impl std::fmt::Display for HostPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostPattern::Exact(h) => f.write_str(h),
            HostPattern::Subdomains(d) => write!(f, "*.{d}"),
        }
    }
}

/// What a plugin may do over the network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetworkGrant {
    pub allow: Vec<Origin>,
    /// Requests per call.
    pub max_requests: u32,
    /// Per request, from connecting to the last byte of the body.
    #[serde(rename = "timeout_ms", serialize_with = "as_millis")]
    pub timeout: Duration,
    pub max_response_bytes: u64,
    pub max_request_bytes: u64,
    pub credentials: Vec<Credential>,
}

impl Default for NetworkGrant {
    fn default() -> Self {
        NetworkGrant {
            allow: Vec::new(),
            max_requests: 20,
            timeout: Duration::from_secs(30),
            max_response_bytes: 4 << 20,
            max_request_bytes: 1 << 20,
            credentials: Vec::new(),
        }
    }
}

impl NetworkGrant {
    /// Checks `[network]` and `[[credentials]]`: each origin parses, each
    /// credential's secret exists and its host is allowed.
    pub fn resolve(
        t: &NetworkToml,
        credentials: &[CredentialToml],
        secrets: &Secrets,
    ) -> Result<NetworkGrant, String> {
        let d = NetworkGrant::default();
        let allow = t
            .allow
            .iter()
            .enumerate()
            .map(|(i, o)| Origin::parse(o).map_err(|e| format!("network.allow[{i}]: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        let mut resolved = Vec::new();
        for (i, c) in credentials.iter().enumerate() {
            let at = |msg: String| format!("credentials[{i}].{msg}");
            let host = HostPattern::parse(&c.host).map_err(|e| at(format!("host: {e}")))?;
            if !allow.iter().any(|o| match &host {
                HostPattern::Exact(h) => o.host.matches(h),
                HostPattern::Subdomains(_) => o.host == host,
            }) {
                return Err(at(format!(
                    "host: {:?} is not in network.allow, so no request could carry it",
                    c.host
                )));
            }
            if http::HeaderName::from_bytes(c.header.as_bytes()).is_err() {
                return Err(at(format!("header: {:?} is not a header name", c.header)));
            }
            if secrets.get(&c.secret).is_none() {
                return Err(at(format!(
                    "secret: no secret named {:?}; {}",
                    c.secret,
                    secrets.where_to_put(&c.secret)
                )));
            }
            resolved.push(Credential {
                secret: c.secret.clone(),
                host,
                header: c.header.to_ascii_lowercase(),
                prefix: c.prefix.clone(),
            });
        }
        Ok(NetworkGrant {
            allow,
            max_requests: match t.max_requests {
                Some(v) => check("network.max_requests", v, 1, 10_000)? as u32,
                None => d.max_requests,
            },
            timeout: match t.timeout_ms {
                Some(v) => Duration::from_millis(check("network.timeout_ms", v, 1, 3_600_000)?),
                None => d.timeout,
            },
            max_response_bytes: match t.max_response_kib {
                Some(v) => check("network.max_response_kib", v, 1, 1 << 20)? << 10,
                None => d.max_response_bytes,
            },
            max_request_bytes: match t.max_request_kib {
                Some(v) => check("network.max_request_kib", v, 1, 1 << 20)? << 10,
                None => d.max_request_bytes,
            },
            credentials: resolved,
        })
    }
}

/// Why an address may not be reached without being named, or `None` for a
/// public address. IPv6 forms that carry an IPv4 address (mapped,
/// compatible, NAT64, 6to4, Teredo) are judged by that address too.
pub fn internal_address(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            if v4.is_loopback() {
                Some("a loopback address")
            } else if v4.is_private() {
                Some("a private address")
            } else if v4.is_link_local() {
                Some("a link-local address (cloud metadata services live there)")
            } else if a == 100 && (64..128).contains(&b) {
                Some("a shared (carrier-grade NAT) address")
            } else if v4.is_unspecified() || a == 0 {
                Some("an unspecified address")
            } else if (a, b, c) == (192, 0, 0) || (a == 198 && (b == 18 || b == 19)) {
                Some("a special-purpose or benchmarking address")
            } else if v4.is_broadcast() || v4.is_multicast() || a >= 240 {
                Some("a broadcast, multicast or reserved address")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = embedded_ipv4(v6) {
                return internal_address(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            if v6.is_loopback() {
                Some("a loopback address")
            } else if v6.is_unspecified() {
                Some("an unspecified address")
            } else if first & 0xfe00 == 0xfc00 {
                Some("a private (unique local) address")
            } else if first & 0xffc0 == 0xfe80 || first & 0xffc0 == 0xfec0 {
                Some("a link-local or site-local address")
            } else if v6.is_multicast() {
                Some("a multicast address")
            } else {
                None
            }
        }
    }
}

/// The IPv4 address an IPv6 address stands for, where it has one: mapped
/// (`::ffff:a.b.c.d`), compatible (`::a.b.c.d`), NAT64 (`64:ff9b::/96`,
/// `64:ff9b:1::/48`), 6to4 (`2002::/16`) and Teredo (`2001::/32`, the client
/// address inverted).
fn embedded_ipv4(v6: std::net::Ipv6Addr) -> Option<std::net::Ipv4Addr> {
    let s = v6.segments();
    let low = |hi: u16, lo: u16| std::net::Ipv4Addr::from(((hi as u32) << 16) | lo as u32);
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    match s {
        [0, 0, 0, 0, 0, 0, hi, lo] if (hi, lo) != (0, 0) && (hi, lo) != (0, 1) => Some(low(hi, lo)),
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => Some(low(hi, lo)),
        [0x64, 0xff9b, 1, ..] => Some(low(s[6], s[7])),
        [0x2002, hi, lo, ..] => Some(low(hi, lo)),
        [0x2001, 0, ..] => Some(low(!s[6], !s[7])),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_parse_and_match() {
        let o = Origin::parse("https://*.wikipedia.org").unwrap();
        assert!(o.matches(true, "en.wikipedia.org", 443));
        assert!(o.matches(true, "a.b.WIKIPEDIA.org", 443));
        assert!(!o.matches(true, "wikipedia.org", 443));
        assert!(!o.matches(true, "evilwikipedia.org", 443));
        assert!(!o.matches(false, "en.wikipedia.org", 80));
        let local = Origin::parse("http://127.0.0.1:8080").unwrap();
        assert!(
            local.matches(false, "127.0.0.1", 8080) && !local.matches(false, "127.0.0.1", 8081)
        );
        assert!(local.names("127.0.0.1".parse().unwrap()));
        assert!(
            !Origin::parse("http://example.com")
                .unwrap()
                .names("127.0.0.1".parse().unwrap())
        );
        assert!(
            !Origin::parse("http://localhost:1")
                .unwrap()
                .names("127.0.0.1".parse().unwrap())
        );
        let v6 = Origin::parse("http://[::1]:9000").unwrap();
        assert!(v6.matches(false, "::1", 9000));
        assert_eq!(
            Origin::parse("ftp://x.org").unwrap_err(),
            "\"ftp://x.org\": the scheme must be http or https; expected scheme://host[:port], e.g. \"https://api.example.com\""
        );
        assert!(
            Origin::parse("https://x.org/path")
                .unwrap_err()
                .contains("no path")
        );
        assert!(
            Origin::parse("https://x.org:99999")
                .unwrap_err()
                .contains("port")
        );
        assert!(
            Origin::parse("https://ex ample.org")
                .unwrap_err()
                .contains("not a host name")
        );
        assert!(
            Origin::parse("http://[::1]junk")
                .unwrap_err()
                .contains("only :port may follow ]")
        );
    }

    #[test]
    fn internal_addresses_are_named() {
        for (ip, why) in [
            ("127.0.0.1", Some("a loopback address")),
            ("10.1.2.3", Some("a private address")),
            ("172.16.0.1", Some("a private address")),
            ("192.168.1.1", Some("a private address")),
            (
                "169.254.169.254",
                Some("a link-local address (cloud metadata services live there)"),
            ),
            (
                "100.100.100.200",
                Some("a shared (carrier-grade NAT) address"),
            ),
            ("0.0.0.0", Some("an unspecified address")),
            ("::1", Some("a loopback address")),
            ("::ffff:10.0.0.1", Some("a private address")),
            ("fd00:ec2::254", Some("a private (unique local) address")),
            ("fe80::1", Some("a link-local or site-local address")),
            ("fec0::1", Some("a link-local or site-local address")),
            (
                "192.0.0.8",
                Some("a special-purpose or benchmarking address"),
            ),
            (
                "198.18.0.1",
                Some("a special-purpose or benchmarking address"),
            ),
            // IPv6 forms of internal IPv4 addresses: compatible, NAT64, 6to4, Teredo.
            ("::7f00:1", Some("a loopback address")),
            (
                "64:ff9b::a9fe:a9fe",
                Some("a link-local address (cloud metadata services live there)"),
            ),
            ("64:ff9b:1::a00:1", Some("a private address")),
            (
                "2002:a9fe:a9fe::",
                Some("a link-local address (cloud metadata services live there)"),
            ),
            (
                "2001:0:4136:e378:8000:63bf:80ff:fffe",
                Some("a loopback address"),
            ),
            ("93.184.215.14", None),
            ("2606:4700::1111", None),
            ("2002:5db8:d70e::1", None),
        ] {
            assert_eq!(internal_address(ip.parse().unwrap()), why, "{ip}");
        }
    }

    #[test]
    fn credentials_need_an_allowed_host_and_an_existing_secret() {
        let network = NetworkToml {
            allow: vec!["https://api.github.com".into()],
            ..Default::default()
        };
        let cred = |host: &str, secret: &str| CredentialToml {
            secret: secret.into(),
            host: host.into(),
            header: "authorization".into(),
            prefix: "Bearer ".into(),
        };
        let secrets = Secrets::from_pairs([("gh".to_string(), "v".to_string())]);
        let ok =
            NetworkGrant::resolve(&network, &[cred("api.github.com", "gh")], &secrets).unwrap();
        assert_eq!(ok.credentials[0].header, "authorization");
        assert_eq!(
            NetworkGrant::resolve(&network, &[cred("example.com", "gh")], &secrets).unwrap_err(),
            "credentials[0].host: \"example.com\" is not in network.allow, so no request could carry it"
        );
        assert_eq!(
            NetworkGrant::resolve(&network, &[cred("api.github.com", "nope")], &secrets)
                .unwrap_err(),
            "credentials[0].secret: no secret named \"nope\"; set WASMCLAW_SECRET_NOPE or add it to secrets.toml in the wasmclaw home"
        );
    }
}
