//! Who may connect: allowed origins and access tokens, checked whatever a client says about
//! itself. A browser page on another site cannot open a session unless its origin is allowed; a
//! client without a configured token cannot open one at all.

use subtle::ConstantTimeEq;

use super::glob_matches;

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
    if let (Some(authority), Some(host)) = (authority, host)
        && authority.eq_ignore_ascii_case(host.trim())
    {
        return true;
    }
    allowed.iter().any(|entry| match entry.as_str() {
        "*" => true,
        "localhost" => authority.is_some_and(|authority| is_loopback_host(host_of(authority))),
        pattern => glob_matches(&pattern.trim_end_matches('/').to_ascii_lowercase(), &origin.to_ascii_lowercase()),
    })
}

/// Compares secrets in time independent of where they differ (`subtle`).
pub(crate) fn same_secret(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
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
    let query = query?;
    form_urlencoded::parse(query.as_bytes()).find(|(key, _)| key == "token").map(|(_, value)| value.into_owned())
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

    #[test]
    fn secrets_compare_equal_only_when_equal() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
        assert!(!same_secret("", "a"));
    }
}
