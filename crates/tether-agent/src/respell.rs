//! Argument values the model wrote in another spelling of a value the tool allows.
//!
//! The grammar a constrained model writes under leaves out the `enum`s of the tools' arguments
//! (`model::schema::loosen`: a grammar that allows only the red mug makes a model asked for a
//! poster add the red mug), so the model writes the value it means in its own words. Measured with
//! the 1.5B model on the storefront: asked for "one blue mug", it wrote `productId: "blue-mug"`
//! where the tool allows `mug-blue`, read the validation error, and wrote `blue-mug` again until
//! the loop guard stopped it. A value that is none of the allowed ones but has exactly the words
//! of one of them (in any order, case and separators: `blue-mug`, `Blue mug`, `MUG_BLUE`) is read
//! as that value ([`respell`]): it cannot mean anything else, so this changes no meaning, and the
//! model reads that it was read so. Anything else (another word, a plural, two allowed values with
//! the same words) stays as written, for the validation to refuse.

use serde_json::Value;

use crate::claims::plain_words;

/// One argument value read as an allowed value ([`respell`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Respelled {
    /// The argument (a top-level property of the tool's parameters).
    pub argument: String,
    /// What the model wrote.
    pub written: String,
    /// The allowed value it was read as.
    pub read_as: String,
}

impl Respelled {
    /// What the model reads before the call's result: `(productId "blue-mug" was read as
    /// "mug-blue".)`.
    pub fn note(&self) -> String {
        format!("({} \"{}\" was read as \"{}\".)", self.argument, self.written, self.read_as)
    }
}

/// Rewrites, in `args`, each top-level string whose property in `parameters` (a tool's JSON
/// Schema) has an `enum` that does not hold it, to the one string of that `enum` with the same
/// words (lowercased, split at anything not a letter or digit, in any order). Returns what it
/// rewrote; nothing else in `args` changes.
pub fn respell(parameters: &Value, args: &mut Value) -> Vec<Respelled> {
    let (Some(properties), Some(args)) =
        (parameters.get("properties").and_then(Value::as_object), args.as_object_mut())
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (argument, value) in args.iter_mut() {
        let Some(allowed) = properties.get(argument).and_then(|p| p.get("enum")).and_then(Value::as_array) else {
            continue;
        };
        let Some(written) = value.as_str().filter(|_| !allowed.contains(value)) else { continue };
        let words = sorted_words(written);
        if words.is_empty() {
            continue;
        }
        let mut same = allowed.iter().filter_map(Value::as_str).filter(|candidate| sorted_words(candidate) == words);
        if let (Some(read_as), None) = (same.next(), same.next()) {
            out.push(Respelled {
                argument: argument.clone(),
                written: written.to_string(),
                read_as: read_as.to_string(),
            });
            *value = Value::String(read_as.to_string());
        }
    }
    out
}

/// The words of `text` (as [`plain_words`] splits them), sorted.
fn sorted_words(text: &str) -> Vec<String> {
    let mut words = plain_words(text);
    words.sort_unstable();
    words
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn products() -> Value {
        json!({"type": "object", "properties": {
            "productId": {"type": "string", "enum": ["mug-red", "mug-blue", "tee-black", "poster-space"]},
            "size": {"type": "string", "enum": ["S", "M", "L"]},
            "quantity": {"type": "integer"}
        }})
    }

    #[test]
    fn a_value_with_the_words_of_one_allowed_value_is_read_as_it() {
        for written in ["blue-mug", "Blue mug", "MUG_BLUE", " mug  blue "] {
            let mut args = json!({"productId": written, "quantity": 2});
            let respelled = respell(&products(), &mut args);
            assert_eq!(args, json!({"productId": "mug-blue", "quantity": 2}), "{written}");
            assert_eq!(
                respelled,
                vec![Respelled { argument: "productId".into(), written: written.into(), read_as: "mug-blue".into() }]
            );
        }
        assert_eq!(
            Respelled { argument: "productId".into(), written: "blue-mug".into(), read_as: "mug-blue".into() }.note(),
            "(productId \"blue-mug\" was read as \"mug-blue\".)"
        );
        let mut args = json!({"productId": "tee-black", "size": "l"});
        respell(&products(), &mut args);
        assert_eq!(args["size"], "L", "case alone");
    }

    #[test]
    fn anything_else_stays_as_written() {
        let cases = [
            json!({"productId": "mug-blue"}),     // allowed already
            json!({"productId": "blue-mugs"}),    // another word
            json!({"productId": "mug"}),          // fewer words: which mug?
            json!({"productId": "red-blue-mug"}), // more words
            json!({"productId": "--"}),           // no words
            json!({"productId": 7}),              // not a string
            json!({"quantity": "2"}),             // no enum
            json!({"colour": "blue-mug"}),        // no such property
        ];
        for case in cases {
            let mut args = case.clone();
            assert!(respell(&products(), &mut args).is_empty(), "{case}");
            assert_eq!(args, case);
        }
        // Two allowed values with the same words: either could be meant.
        let twins = json!({"properties": {"seat": {"enum": ["window aisle", "aisle window"]}}});
        let mut args = json!({"seat": "aisle-window"});
        assert!(respell(&twins, &mut args).is_empty());
        // Parameters without properties, arguments that are not an object.
        assert!(respell(&json!({}), &mut json!({"productId": "blue-mug"})).is_empty());
        assert!(respell(&products(), &mut json!(["blue-mug"])).is_empty());
    }
}
