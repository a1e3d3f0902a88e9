//! The full validator: the `jsonschema` crate, every keyword of JSON Schema 2020-12.

use serde_json::Value;

use super::{CompiledSchema, NOTHING_ALLOWED, ValidationError, Validator};
use crate::CoreError;

/// A [`Validator`] backed by `jsonschema` (draft 2020-12, formats as annotations, no remote
/// references).
#[derive(Debug, Clone, Copy, Default)]
pub struct FullValidator;

/// A schema compiled by [`FullValidator`].
#[derive(Debug)]
pub struct FullSchema(jsonschema::Validator);

impl Validator for FullValidator {
    type Compiled = FullSchema;

    fn compile(&self, schema: &Value) -> Result<FullSchema, CoreError> {
        jsonschema::draft202012::options().should_validate_formats(false).build(schema).map(FullSchema).map_err(
            |error| CoreError::InvalidSchema {
                path: error.instance_path().as_str().to_string(),
                reason: error.to_string(),
            },
        )
    }
}

impl CompiledSchema for FullSchema {
    fn errors(&self, instance: &Value) -> Vec<ValidationError> {
        self.0
            .iter_errors(instance)
            .map(|error| ValidationError {
                instance_path: error.instance_path().as_str().to_string(),
                message: match error.kind() {
                    // `jsonschema` lists the allowed values, which is nothing for an empty enum.
                    jsonschema::error::ValidationErrorKind::Enum { options }
                        if options.as_array().is_some_and(Vec::is_empty) =>
                    {
                        format!("{} is not allowed: {NOTHING_ALLOWED}", error.instance())
                    }
                    _ => error.to_string(),
                },
            })
            .collect()
    }

    fn is_valid(&self, instance: &Value) -> bool {
        self.0.is_valid(instance)
    }
}
