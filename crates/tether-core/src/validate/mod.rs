//! Argument validation: the [`Validator`] seam, its error format, and schema defaults.
//!
//! Two implementations exist. [`CompactValidator`] implements the keywords tool schemas use and
//! refuses every other keyword at compile time; it is small enough for the browser and hands
//! `pattern` to an injected [`RegexEngine`]. `FullValidator` (feature `full`) wraps the
//! `jsonschema` crate and implements all of JSON Schema 2020-12; the server uses it, and tests
//! use it as the oracle for the compact one.

mod compact;
mod defaults;
#[cfg(feature = "full")]
mod full;

#[cfg(feature = "native-regex")]
pub use compact::NativeRegex;
pub use compact::{COMPACT_KEYWORDS, CompactSchema, CompactValidator, CompiledRegex, RegexEngine};
pub use defaults::apply_defaults;
#[cfg(feature = "full")]
pub use full::{FullSchema, FullValidator};

use serde_json::Value;

use crate::CoreError;

/// Compiles tool schemas. Each tool's schema is compiled once, when the tool is registered.
pub trait Validator {
    /// A compiled schema, ready to validate argument objects.
    type Compiled: CompiledSchema;

    /// Compiles a schema, refusing an invalid one (or, for the compact validator, one that uses
    /// an unsupported keyword) with an error that says where and why.
    fn compile(&self, schema: &Value) -> Result<Self::Compiled, CoreError>;
}

/// A compiled schema.
pub trait CompiledSchema {
    /// Every way `instance` breaks the schema; empty when it is valid.
    fn errors(&self, instance: &Value) -> Vec<ValidationError>;

    /// Whether `instance` is valid. May be faster than [`CompiledSchema::errors`].
    fn is_valid(&self, instance: &Value) -> bool {
        self.errors(instance).is_empty()
    }
}

/// One way an argument object breaks its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    /// JSON Pointer to the offending value in the arguments; empty for the arguments object.
    pub instance_path: String,
    /// What is wrong, in words.
    pub message: String,
}

impl std::fmt::Display for ValidationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = if self.instance_path.is_empty() { "/" } else { &self.instance_path };
        write!(f, "{path}: {}", self.message)
    }
}

/// What a validation error says of an argument whose `enum` is empty (a list the page shares
/// that is empty now, e.g. the items of an empty to-do list): no value can be right, and that
/// is said, rather than "is not one of" and nothing.
pub const NOTHING_ALLOWED: &str = "no value is allowed now (the list of allowed values is empty)";

/// The message the model reads for invalid arguments:
/// `Validation args "<tool>": <path>: <message>; <path>: <message>`.
pub fn format_validation_errors(tool: &str, errors: &[ValidationError]) -> String {
    let mut out = format!("Validation args \"{tool}\": ");
    for (n, error) in errors.iter().enumerate() {
        if n > 0 {
            out.push_str("; ");
        }
        out.push_str(&error.to_string());
    }
    out
}
