//! Who may connect (origins, tokens) and the operator's risk floors for tools.
//!
//! These are the server's own rules, applied whatever a client says about itself: a browser
//! page on another site cannot open a session unless its origin is allowed, a client without a
//! configured token cannot open one at all, and a tool's risk can be raised by the operator but
//! never lowered by the client.

use std::fmt;
use std::str::FromStr;

use serde_json::Value;
use tether_protocol::Risk;

use crate::ServerError;

/// Matches `text` against a pattern where `*` stands for any run of characters (also none).
/// Every other character matches itself.
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    let (pattern, text) = (pattern.as_bytes(), text.as_bytes());
    let (mut p, mut t) = (0, 0);
    // Where the last `*` was and how much of the text it had taken, to backtrack to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((star_p, star_t)) = star {
            p = star_p + 1;
            t = star_t + 1;
            star = Some((star_p, star_t + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// The operator's minimum risk for the tools whose names match a pattern, e.g.
/// `delete_*=blocked`. The stricter of this and the client's own risk applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RiskFloor {
    /// Tool-name pattern: `*` matches any run of characters; anything else matches itself.
    pub pattern: String,
    /// The least strict risk these tools may have.
    pub risk: Risk,
}

impl RiskFloor {
    /// A floor for the tools matching `pattern`. Refused when the pattern is empty or holds
    /// characters that no tool name has.
    pub fn new(pattern: impl Into<String>, risk: Risk) -> Result<RiskFloor, ServerError> {
        let pattern = pattern.into();
        let valid = !pattern.is_empty()
            && pattern.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '*'));
        if !valid {
            return Err(ServerError::Config(format!(
                "risk floor pattern {pattern:?}: use letters, digits, `_`, `-`, `.`, `:` and `*` (any run of characters)"
            )));
        }
        Ok(RiskFloor { pattern, risk })
    }

    /// Whether this floor applies to the tool `name`.
    pub fn matches(&self, name: &str) -> bool {
        glob_matches(&self.pattern, name)
    }

    /// Reads floors from a YAML (or JSON) policy file: a `riskFloor` mapping from tool-name
    /// pattern to risk, e.g. `riskFloor: {cart_clear: critical, "delete_*": blocked}`.
    pub fn from_yaml_str(text: &str, origin: &str) -> Result<Vec<RiskFloor>, ServerError> {
        let error = |message: String| ServerError::Config(format!("policy file {origin}: {message}"));
        let document: Value = serde_yaml_ng::from_str(text).map_err(|e| error(format!("not valid YAML: {e}")))?;
        let Some(object) = document.as_object() else {
            return Err(error("expected a mapping with a `riskFloor` mapping".into()));
        };
        if let Some(unknown) = object.keys().find(|key| *key != "riskFloor") {
            return Err(error(format!("unknown field {unknown:?} (expected `riskFloor`)")));
        }
        let Some(floors) = object.get("riskFloor").and_then(Value::as_object) else {
            return Err(error("`riskFloor` must be a mapping from tool-name pattern to risk".into()));
        };
        floors
            .iter()
            .map(|(pattern, risk)| {
                let risk = risk.as_str().and_then(Risk::parse).ok_or_else(|| {
                    error(format!("risk of {pattern:?} must be one of none, low, high, critical, blocked"))
                })?;
                RiskFloor::new(pattern.clone(), risk).map_err(|e| error(e.to_string()))
            })
            .collect()
    }
}

impl FromStr for RiskFloor {
    type Err = ServerError;

    /// Parses `PATTERN=RISK`, e.g. `delete_*=blocked` or `cart_clear=critical`.
    fn from_str(text: &str) -> Result<RiskFloor, ServerError> {
        let Some((pattern, risk)) = text.split_once('=') else {
            return Err(ServerError::Config(format!(
                "risk floor {text:?}: expected PATTERN=RISK, e.g. delete_*=blocked"
            )));
        };
        let risk = Risk::parse(risk.trim()).ok_or_else(|| {
            ServerError::Config(format!(
                "risk floor {text:?}: the risk must be one of none, low, high, critical, blocked"
            ))
        })?;
        RiskFloor::new(pattern.trim(), risk)
    }
}

impl fmt::Display for RiskFloor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.pattern, self.risk)
    }
}

/// The strictest floor that applies to `name` (`none` when no floor matches).
pub(crate) fn floor_for(floors: &[RiskFloor], name: &str) -> Risk {
    floors.iter().filter(|floor| floor.matches(name)).fold(Risk::None, |risk, floor| risk.stricter(floor.risk))
}

/// The host of an origin or `Host` header, without the port: `localhost`, `127.0.0.1`, `[::1]`.
fn host_of(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        // An IPv6 literal keeps its brackets.
        return rest.find(']').map_or(authority, |end| &authority[..end + 2]);
    }
    authority.rsplit_once(':').map_or(authority, |(host, _)| host)
}

fn is_loopback_host(host: &str) -> bool {
    let host = host.to_ascii_lowercase();
    host == "localhost" || host.ends_with(".localhost") || host == "[::1]" || host.starts_with("127.")
}

/// Whether a browser page at `origin` may open a WebSocket on this server.
///
/// `origin` is the `Origin` header, `host` the `Host` header the page connected to. The page's
/// own origin (the same host and port as the server, e.g. the served storefront) is always
/// allowed. Each entry of `allowed` is `*` (any origin), `localhost` (any page on a loopback
/// host: `localhost`, `127.0.0.1`, `[::1]`, any port) or an origin pattern such as
/// `https://shop.example.com` or `https://*.example.com` (`*` matches any run of characters).
pub(crate) fn origin_allowed(allowed: &[String], origin: &str, host: Option<&str>) -> bool {
    let origin = origin.trim().trim_end_matches('/');
    let authority = origin.split_once("://").map(|(_, rest)| rest);
    if let (Some(authority), Some(host)) = (authority, host) {
        if authority.eq_ignore_ascii_case(host.trim()) {
            return true;
        }
    }
    allowed.iter().any(|entry| match entry.as_str() {
        "*" => true,
        "localhost" => authority.is_some_and(|authority| is_loopback_host(host_of(authority))),
        pattern => glob_matches(&pattern.trim_end_matches('/').to_ascii_lowercase(), &origin.to_ascii_lowercase()),
    })
}

/// Compares secrets in time independent of where they differ.
pub(crate) fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Decodes `%XX` escapes and `+` (a space) of a query-string value.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = |b: u8| (b as char).to_digit(16);
                match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                    (Some(high), Some(low)) => {
                        out.push((high * 16 + low) as u8);
                        i += 3;
                    }
                    _ => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The token a client presents: `Authorization: Bearer TOKEN`, or `?token=TOKEN` in the URL
/// (browsers cannot set headers on a WebSocket).
pub(crate) fn presented_token(authorization: Option<&str>, query: Option<&str>) -> Option<String> {
    if let Some(value) = authorization {
        let value = value.trim();
        if value.len() > 7 && value[..7].eq_ignore_ascii_case("bearer ") {
            return Some(value[7..].trim().to_string());
        }
    }
    query?.split('&').find_map(|pair| pair.strip_prefix("token=")).map(percent_decode)
}

/// Whether `presented` is one of the configured tokens.
pub(crate) fn token_accepted(tokens: &[String], presented: Option<&str>) -> bool {
    let Some(presented) = presented else { return false };
    // Every token is compared, so the time taken does not tell which one (nearly) matched.
    tokens.iter().fold(false, |found, token| same_secret(token, presented) | found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_runs_of_characters() {
        assert!(glob_matches("delete_*", "delete_account"));
        assert!(glob_matches("delete_*", "delete_"));
        assert!(!glob_matches("delete_*", "undelete_account"));
        assert!(glob_matches("*_clear", "cart_clear"));
        assert!(glob_matches("a*b*c", "axxbyyc"));
        assert!(!glob_matches("a*b*c", "axxbyy"));
        assert!(glob_matches("*", ""));
        assert!(glob_matches("cart_clear", "cart_clear"));
        assert!(!glob_matches("cart_clear", "cart_clears"));
    }

    #[test]
    fn floors_parse_and_the_strictest_wins() {
        let floors: Vec<RiskFloor> =
            ["delete_*=blocked", "cart_clear=critical", "*=low"].iter().map(|s| s.parse().unwrap()).collect();
        assert_eq!(floor_for(&floors, "delete_account"), Risk::Blocked);
        assert_eq!(floor_for(&floors, "cart_clear"), Risk::Critical);
        assert_eq!(floor_for(&floors, "cart_add"), Risk::Low);
        assert_eq!(floor_for(&[], "cart_add"), Risk::None);
        assert!("delete_*".parse::<RiskFloor>().is_err());
        assert!("delete_*=fatal".parse::<RiskFloor>().is_err());
        assert!("rm -rf=blocked".parse::<RiskFloor>().is_err());
        let from_file =
            RiskFloor::from_yaml_str("riskFloor:\n  cart_clear: critical\n  \"delete_*\": blocked\n", "p.yaml")
                .unwrap();
        assert_eq!(from_file.len(), 2);
        assert!(RiskFloor::from_yaml_str("riskFloors: {}", "p.yaml").is_err());
    }

    #[test]
    fn origins_same_origin_localhost_and_patterns() {
        let default = vec!["localhost".to_string()];
        assert!(origin_allowed(&default, "https://shop.example.com", Some("shop.example.com")));
        assert!(origin_allowed(&default, "http://localhost:5173", Some("127.0.0.1:8787")));
        assert!(origin_allowed(&default, "http://127.0.0.1:3000", Some("shop.example.com")));
        assert!(origin_allowed(&default, "http://[::1]:3000", None));
        assert!(!origin_allowed(&default, "https://evil.example", Some("shop.example.com")));
        assert!(!origin_allowed(&default, "https://localhost.evil.example", Some("shop.example.com")));
        assert!(!origin_allowed(&default, "null", Some("shop.example.com")));
        let listed = vec!["https://*.example.com".to_string()];
        assert!(origin_allowed(&listed, "https://app.example.com", Some("api.example.org")));
        assert!(!origin_allowed(&listed, "http://localhost:5173", Some("api.example.org")));
        assert!(origin_allowed(&["*".to_string()], "https://anything.test", None));
    }

    #[test]
    fn tokens_from_the_header_or_the_query() {
        assert_eq!(presented_token(Some("Bearer abc"), None).as_deref(), Some("abc"));
        assert_eq!(presented_token(None, Some("a=1&token=x%2By+z")).as_deref(), Some("x+y z"));
        assert_eq!(presented_token(None, Some("tokens=1")), None);
        let tokens = vec!["one".to_string(), "two".to_string()];
        assert!(token_accepted(&tokens, Some("two")));
        assert!(!token_accepted(&tokens, Some("three")));
        assert!(!token_accepted(&tokens, None));
    }
}
