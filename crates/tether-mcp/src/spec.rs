//! What `--mcp` names: a server's name and how to reach it, `NAME=COMMAND ARGS…` (a child
//! process speaking MCP over its stdio) or `NAME=https://…` (streamable HTTP).

use std::fmt;
use std::str::FromStr;

use crate::McpError;

/// The longest server name: it prefixes every tool name, and a tool name has at most 64 characters.
pub const MAX_SERVER_NAME_LEN: usize = 24;

/// One MCP server to attach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerSpec {
    /// The server's name: letters, digits and `-`, at most [`MAX_SERVER_NAME_LEN`] characters.
    /// Its tools reach the model as `NAME__tool`.
    pub name: String,
    /// How to reach it.
    pub target: McpTarget,
}

/// How an MCP server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTarget {
    /// A child process started by Tether, speaking MCP over its stdin and stdout (its stderr
    /// goes to Tether's log). Restarted when it exits.
    Command {
        /// The program (looked up on `PATH`).
        program: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// A server already running, reached over streamable HTTP at this URL.
    Url(String),
}

impl McpServerSpec {
    /// A server started as `program args…`. Refused when the name is invalid.
    pub fn command(name: &str, program: &str, args: &[&str]) -> Result<Self, McpError> {
        check_name(name, name)?;
        Ok(McpServerSpec {
            name: name.to_string(),
            target: McpTarget::Command {
                program: program.to_string(),
                args: args.iter().map(|a| a.to_string()).collect(),
            },
        })
    }

    /// A server reached over streamable HTTP at `url` (`http://` or `https://`).
    pub fn url(name: &str, url: &str) -> Result<Self, McpError> {
        check_name(name, name)?;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(invalid(url, "the URL must begin with http:// or https://"));
        }
        Ok(McpServerSpec { name: name.to_string(), target: McpTarget::Url(url.to_string()) })
    }
}

fn invalid(spec: &str, reason: &str) -> McpError {
    McpError::InvalidSpec { spec: spec.to_string(), reason: reason.to_string() }
}

fn check_name(spec: &str, name: &str) -> Result<(), McpError> {
    if name.is_empty() {
        return Err(invalid(spec, "the name before `=` is empty (write NAME=COMMAND or NAME=URL)"));
    }
    if name.len() > MAX_SERVER_NAME_LEN {
        return Err(invalid(spec, &format!("the name is longer than {MAX_SERVER_NAME_LEN} characters")));
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return Err(invalid(spec, "the name may hold only letters, digits and `-`"));
    }
    Ok(())
}

/// `NAME=COMMAND ARGS…` (split like a POSIX shell: quotes group, nothing is expanded) or
/// `NAME=http(s)://…`.
impl FromStr for McpServerSpec {
    type Err = McpError;

    fn from_str(spec: &str) -> Result<Self, McpError> {
        let Some((name, rest)) = spec.split_once('=') else {
            return Err(invalid(spec, "expected NAME=COMMAND or NAME=URL"));
        };
        let name = name.trim();
        check_name(spec, name)?;
        let rest = rest.trim();
        if rest.starts_with("http://") || rest.starts_with("https://") {
            return McpServerSpec::url(name, rest);
        }
        let words = shlex::split(rest).ok_or_else(|| invalid(spec, "the command has an unclosed quote"))?;
        let Some((program, args)) = words.split_first() else {
            return Err(invalid(spec, "no command after `=`"));
        };
        Ok(McpServerSpec {
            name: name.to_string(),
            target: McpTarget::Command { program: program.clone(), args: args.to_vec() },
        })
    }
}

impl fmt::Display for McpServerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.target {
            McpTarget::Url(url) => write!(f, "{}={url}", self.name),
            McpTarget::Command { program, args } => {
                let words = std::iter::once(program).chain(args).map(String::as_str);
                let line = shlex::try_join(words).map_err(|_| fmt::Error)?;
                write!(f, "{}={line}", self.name)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_split_like_a_shell_and_shown_back_the_same_way() {
        let spec: McpServerSpec = "files=npx -y server-filesystem '/tmp/my dir'".parse().unwrap();
        assert_eq!(spec.name, "files");
        assert_eq!(
            spec.target,
            McpTarget::Command {
                program: "npx".into(),
                args: vec!["-y".into(), "server-filesystem".into(), "/tmp/my dir".into()]
            }
        );
        assert_eq!(spec.to_string().parse::<McpServerSpec>().unwrap(), spec);
    }

    #[test]
    fn a_url_is_a_streamable_http_server() {
        let spec: McpServerSpec = "docs=https://mcp.example.com/mcp".parse().unwrap();
        assert_eq!(spec.target, McpTarget::Url("https://mcp.example.com/mcp".into()));
        assert_eq!(spec.to_string(), "docs=https://mcp.example.com/mcp");
    }

    #[test]
    fn bad_values_say_what_is_wrong() {
        for (value, needle) in [
            ("no-equals-sign", "expected NAME=COMMAND"),
            ("=node server.js", "name before `=` is empty"),
            ("a_b=node", "only letters, digits and `-`"),
            ("a-very-long-server-name-indeed=node", "longer than 24"),
            ("files=", "no command"),
            ("files=node 'unclosed", "unclosed quote"),
        ] {
            let error = value.parse::<McpServerSpec>().unwrap_err().to_string();
            assert!(error.contains(needle), "{value}: {error}");
        }
        assert!(McpServerSpec::url("docs", "ftp://x").unwrap_err().to_string().contains("http://"));
    }
}
