//! The operator's risk floors: a tool's risk can be raised by the operator, never lowered by the
//! client.

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
}
