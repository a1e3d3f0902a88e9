//! Checking an instance against a compiled [`CompactSchema`]: every error with its JSON pointer,
//! or a yes/no answer that stops at the first problem.

use serde_json::{Map, Number, Value};

use super::{CompactSchema, CompiledRegex, types};
use crate::json::{
    canonical_key, compare_numbers, escape_pointer_token, is_integer, is_multiple_of, json_equal, short,
};
use crate::validate::{CompiledSchema, ValidationError};

fn type_matches(flags: u8, value: &Value) -> bool {
    let flag = match value {
        Value::Null => types::NULL,
        Value::Bool(_) => types::BOOLEAN,
        Value::Object(_) => types::OBJECT,
        Value::Array(_) => types::ARRAY,
        Value::String(_) => types::STRING,
        Value::Number(number) if is_integer(number) => types::NUMBER | types::INTEGER,
        Value::Number(_) => types::NUMBER,
    };
    flags & flag != 0
}

fn type_list(flags: u8) -> String {
    let mut list = String::new();
    for (name, _) in types::NAMES.iter().filter(|(_, flag)| flags & flag != 0) {
        if !list.is_empty() {
            list.push_str(", ");
        }
        list.push('"');
        list.push_str(name);
        list.push('"');
    }
    list
}

/// Where validation messages go: collected, or nowhere when only validity matters.
struct Report<'a> {
    errors: Option<&'a mut Vec<ValidationError>>,
}

impl Report<'_> {
    fn collecting(&self) -> bool {
        self.errors.is_some()
    }

    fn push(&mut self, path: &str, message: impl FnOnce() -> String) {
        if let Some(errors) = self.errors.as_deref_mut() {
            errors.push(ValidationError { instance_path: path.to_string(), message: message() });
        }
    }
}

impl<X: CompiledRegex> CompactSchema<X> {
    /// Validates `value` against node `index`. Without a collecting report it stops at the
    /// first problem.
    fn check(&self, index: usize, value: &Value, path: &mut String, report: &mut Report<'_>) -> bool {
        let node = &self.nodes[index];
        if let Some(always) = node.always {
            if !always {
                report.push(path, || format!("False schema does not allow {}", short(value)));
            }
            return always;
        }
        let mut valid = true;
        macro_rules! fail {
            ($($message:tt)*) => {{
                valid = false;
                if !report.collecting() {
                    return false;
                }
                report.push(path, || format!($($message)*));
            }};
        }

        if let Some(target) = node.reference {
            if !self.check(target, value, path, report) {
                valid = false;
                if !report.collecting() {
                    return false;
                }
            }
        }
        if node.types != 0 && !type_matches(node.types, value) {
            if node.types.count_ones() == 1 {
                fail!("{} is not of type {}", short(value), type_list(node.types));
            } else {
                fail!("{} is not of types {}", short(value), type_list(node.types));
            }
        }
        if let Some(options) = &node.enumeration {
            if options.is_empty() {
                fail!("{} is not allowed: {}", short(value), crate::validate::NOTHING_ALLOWED);
            } else if !options.iter().any(|option| json_equal(option, value)) {
                fail!("{} is not one of {}", short(value), short(&Value::Array(options.clone())));
            }
        }
        if let Some(constant) = &node.constant {
            if !json_equal(constant, value) {
                fail!("{} was expected", short(constant));
            }
        }
        match value {
            Value::Object(object) => {
                for name in &node.required {
                    if !object.contains_key(name) {
                        fail!("\"{name}\" is a required property");
                    }
                }
                for (name, child) in &node.properties {
                    if let Some(property) = object.get(name) {
                        if !self.check_child(*child, property, path, name, report) {
                            valid = false;
                            if !report.collecting() {
                                return false;
                            }
                        }
                    }
                }
                if let Some(additional) = node.additional_properties {
                    let extra =
                        object.iter().filter(|(name, _)| !node.properties.iter().any(|(known, _)| known == *name));
                    if self.nodes[additional].always == Some(false) {
                        let (mut unexpected, mut count) = (String::new(), 0);
                        for (name, _) in extra {
                            if count > 0 {
                                unexpected.push_str(", ");
                            }
                            unexpected.push('\'');
                            unexpected.push_str(name);
                            unexpected.push('\'');
                            count += 1;
                        }
                        if count > 0 {
                            let verb = if count == 1 { "was" } else { "were" };
                            fail!("Additional properties are not allowed ({unexpected} {verb} unexpected)");
                        }
                    } else {
                        for (name, property) in extra {
                            if !self.check_child(additional, property, path, name, report) {
                                valid = false;
                                if !report.collecting() {
                                    return false;
                                }
                            }
                        }
                    }
                }
            }
            Value::Array(items) => {
                for (n, item) in items.iter().enumerate() {
                    let schema = node.prefix_items.get(n).copied().or(if n >= node.prefix_items.len() {
                        node.items
                    } else {
                        None
                    });
                    if let Some(schema) = schema {
                        if !self.check_child(schema, item, path, &(n as u64).to_string(), report) {
                            valid = false;
                            if !report.collecting() {
                                return false;
                            }
                        }
                    }
                }
                let len = items.len() as u64;
                if node.min_items.is_some_and(|min| len < min) {
                    fail!(
                        "{} has less than {} item{}",
                        short(value),
                        node.min_items.unwrap_or(0),
                        plural(node.min_items)
                    );
                }
                if node.max_items.is_some_and(|max| len > max) {
                    fail!(
                        "{} has more than {} item{}",
                        short(value),
                        node.max_items.unwrap_or(0),
                        plural(node.max_items)
                    );
                }
                if node.unique_items && !all_unique(items) {
                    fail!("{} has non-unique elements", short(value));
                }
            }
            Value::Number(number) => {
                use std::cmp::Ordering::{Greater, Less};
                let compare = |limit: &Option<Number>| limit.as_ref().and_then(|limit| compare_numbers(number, limit));
                if compare(&node.minimum) == Some(Less) {
                    fail!("{} is less than the minimum of {}", number_text(number), display(&node.minimum));
                }
                if compare(&node.maximum) == Some(Greater) {
                    fail!("{} is greater than the maximum of {}", number_text(number), display(&node.maximum));
                }
                if node.exclusive_minimum.is_some() && compare(&node.exclusive_minimum) != Some(Greater) {
                    fail!(
                        "{} is less than or equal to the minimum of {}",
                        number_text(number),
                        display(&node.exclusive_minimum)
                    );
                }
                if node.exclusive_maximum.is_some() && compare(&node.exclusive_maximum) != Some(Less) {
                    fail!(
                        "{} is greater than or equal to the maximum of {}",
                        number_text(number),
                        display(&node.exclusive_maximum)
                    );
                }
                if let Some(divisor) = &node.multiple_of {
                    if !is_multiple_of(number, divisor) {
                        fail!("{} is not a multiple of {}", number_text(number), number_text(divisor));
                    }
                }
            }
            Value::String(text) => {
                if node.min_length.is_some() || node.max_length.is_some() {
                    let chars = text.chars().count() as u64;
                    if node.min_length.is_some_and(|min| chars < min) {
                        fail!(
                            "{} is shorter than {} character{}",
                            short(value),
                            node.min_length.unwrap_or(0),
                            plural(node.min_length)
                        );
                    }
                    if node.max_length.is_some_and(|max| chars > max) {
                        fail!(
                            "{} is longer than {} character{}",
                            short(value),
                            node.max_length.unwrap_or(0),
                            plural(node.max_length)
                        );
                    }
                }
                if let Some((source, regex)) = &node.pattern {
                    if !regex.is_match(text) {
                        fail!("{} does not match \"{source}\"", short(value));
                    }
                }
            }
            _ => {}
        }
        for &part in &node.all_of {
            if !self.check(part, value, path, report) {
                valid = false;
                if !report.collecting() {
                    return false;
                }
            }
        }
        if !node.any_of.is_empty() && !node.any_of.iter().any(|&option| self.is_valid_at(option, value)) {
            fail!("{} is not valid under any of the schemas listed in the 'anyOf' keyword", short(value));
        }
        if !node.one_of.is_empty() {
            let matching = node.one_of.iter().filter(|&&option| self.is_valid_at(option, value)).take(2).count();
            if matching == 0 {
                fail!("{} is not valid under any of the schemas listed in the 'oneOf' keyword", short(value));
            } else if matching > 1 {
                fail!("{} is valid under more than one of the schemas listed in the 'oneOf' keyword", short(value));
            }
        }
        if let Some(negated) = node.not {
            if self.is_valid_at(negated, value) {
                fail!("{} should not be valid under the schema in 'not'", short(value));
            }
        }
        valid
    }

    fn check_child(
        &self,
        index: usize,
        value: &Value,
        path: &mut String,
        token: &str,
        report: &mut Report<'_>,
    ) -> bool {
        let len = path.len();
        path.push('/');
        escape_pointer_token(token, path);
        let valid = self.check(index, value, path, report);
        path.truncate(len);
        valid
    }

    fn is_valid_at(&self, index: usize, value: &Value) -> bool {
        self.check(index, value, &mut String::new(), &mut Report { errors: None })
    }
}

fn plural(count: Option<u64>) -> &'static str {
    if count == Some(1) { "" } else { "s" }
}

use crate::json::number_text;

fn display(number: &Option<Number>) -> String {
    number.as_ref().map(number_text).unwrap_or_default()
}

fn all_unique(items: &[Value]) -> bool {
    // Few items: compare pairs. Many: compare canonical keys, so that a long array costs O(n).
    if items.len() <= 16 {
        return items.iter().enumerate().all(|(i, a)| items[i + 1..].iter().all(|b| !json_equal(a, b)));
    }
    // The keys go into a JSON object, used as a set: the same map code the validator already
    // carries, where a set of strings would add a hash table's worth of wasm.
    let mut seen = Map::new();
    items.iter().all(|item| {
        let mut key = String::new();
        canonical_key(item, &mut key);
        seen.insert(key, Value::Null).is_none()
    })
}

impl<X: CompiledRegex> CompiledSchema for CompactSchema<X> {
    fn errors(&self, instance: &Value) -> Vec<ValidationError> {
        let mut errors = Vec::new();
        self.check(0, instance, &mut String::new(), &mut Report { errors: Some(&mut errors) });
        errors
    }

    fn is_valid(&self, instance: &Value) -> bool {
        self.is_valid_at(0, instance)
    }
}
