//! [`Quoted`]: a string in double quotes with JSON escapes, for error messages.

use std::fmt;

/// Displays a string as a JSON string literal: `"cart_add"`, with `"`, `\` and control
/// characters escaped as `serde_json` writes them, except backspace and form feed, written
/// `\u0008` and `\u000c` (the same string to a JSON reader; two arms fewer in the browser
/// module).
///
/// Messages quote names with it rather than with `{:?}`: the output is the same for ordinary
/// names, and the browser module does not carry Rust's `Debug` escaping (and its Unicode tables).
#[derive(Debug, Clone, Copy)]
pub struct Quoted<'a>(pub &'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        f.write_str("\"")?;
        let mut rest = self.0;
        while let Some(at) = rest.find(|c: char| c < ' ' || c == '"' || c == '\\') {
            f.write_str(&rest[..at])?;
            let byte = rest.as_bytes()[at];
            match byte {
                b'"' => f.write_str("\\\"")?,
                b'\\' => f.write_str("\\\\")?,
                b'\n' => f.write_str("\\n")?,
                b'\r' => f.write_str("\\r")?,
                b'\t' => f.write_str("\\t")?,
                _ => {
                    let escape = [b'\\', b'u', b'0', b'0', HEX[usize::from(byte >> 4)], HEX[usize::from(byte & 0xf)]];
                    // Six ASCII bytes are valid UTF-8.
                    f.write_str(std::str::from_utf8(&escape).unwrap_or_default())?;
                }
            }
            rest = &rest[at + 1..];
        }
        f.write_str(rest)?;
        f.write_str("\"")
    }
}

#[cfg(test)]
mod tests {
    use super::Quoted;

    #[test]
    fn quotes_as_serde_json_does() {
        for text in ["cart_add", "", "quote \" slash \\ nl \n tab \t cr \r nul \0 us \u{1f} del \u{7f} é ✓"] {
            assert_eq!(Quoted(text).to_string(), serde_json::to_string(text).unwrap());
        }
    }

    #[test]
    fn every_control_character_reads_back_as_itself() {
        let text = "bs \u{8} ff \u{c} nul \0 bell \u{7}";
        let quoted = Quoted(text).to_string();
        assert_eq!(quoted, r#""bs \u0008 ff \u000c nul \u0000 bell \u0007""#);
        assert_eq!(serde_json::from_str::<String>(&quoted).unwrap(), text);
    }
}
