//! JSON helpers shared by the validators: mathematical equality, number comparison, and short
//! renderings of values for error messages.

use std::cmp::Ordering;

use serde_json::{Number, Value};

/// Compares two JSON numbers by value: `1`, `1.0` and `1e0` are equal.
pub(crate) fn compare_numbers(a: &Number, b: &Number) -> Option<Ordering> {
    match (as_i128(a), as_i128(b)) {
        (Some(a), Some(b)) => Some(a.cmp(&b)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

fn as_i128(number: &Number) -> Option<i128> {
    number.as_i64().map(i128::from).or_else(|| number.as_u64().map(i128::from))
}

/// The JSON integer (`u64` or `i64`) a float equals, when it equals one: `3.0` is `3`, `2.5`,
/// `1e20` and non-finite values are not.
pub fn integer_number(float: f64) -> Option<Number> {
    const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    if float.fract() != 0.0 {
        None
    } else if (0.0..TWO_POW_64).contains(&float) {
        Some(Number::from(float as u64))
    } else if (-TWO_POW_63..0.0).contains(&float) {
        Some(Number::from(float as i64))
    } else {
        None
    }
}

/// Whether a number is an integer in the JSON Schema sense (`1.0` is one).
pub(crate) fn is_integer(number: &Number) -> bool {
    number.is_i64() || number.is_u64() || number.as_f64().is_some_and(|f| f.is_finite() && f.fract() == 0.0)
}

/// JSON equality as JSON Schema defines it: numbers compare by value, objects ignore key order.
pub(crate) fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => compare_numbers(a, b) == Some(Ordering::Equal),
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(a, b)| json_equal(a, b)),
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(key, value)| b.get(key).is_some_and(|other| json_equal(value, other)))
        }
        _ => a == b,
    }
}

/// A canonical text for a value such that two values are [`json_equal`] exactly when their
/// keys are equal. Used to find duplicates in long arrays without comparing every pair.
pub(crate) fn canonical_key(value: &Value, out: &mut String) {
    match value {
        Value::Number(number) => {
            // Integral floats are written as the integer they equal, so `1.0` and `1` agree.
            let integer = number.as_f64().filter(|_| as_i128(number).is_none()).and_then(integer_number);
            out.push_str(&number_text(integer.as_ref().unwrap_or(number)));
        }
        Value::Array(items) => {
            out.push('[');
            for item in items {
                canonical_key(item, out);
                out.push(',');
            }
            out.push(']');
        }
        Value::Object(map) => {
            // serde_json's `Map` iterates in key order (the `preserve_order` feature is not
            // enabled; the test below would catch it), so equal objects give equal keys.
            out.push('{');
            for (key, value) in map {
                write_string(key, out);
                out.push(':');
                canonical_key(value, out);
                out.push(',');
            }
            out.push('}');
        }
        other => write_json(other, out),
    }
}

/// Writes a value as compact JSON text, exactly as `serde_json::to_string` does.
///
/// The browser runtime parses and writes JSON with the browser's own `JSON`; this writer keeps
/// serde_json's serializer (and its float formatting) out of the wasm module where only error
/// messages need JSON text.
pub(crate) fn write_json(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(flag) => out.push_str(if *flag { "true" } else { "false" }),
        Value::Number(number) => out.push_str(&number_text(number)),
        Value::String(text) => write_string(text, out),
        Value::Array(items) => {
            out.push('[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                write_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (n, (key, item)) in map.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                write_json(item, out);
            }
            out.push('}');
        }
    }
}

/// Writes a JSON string literal with serde_json's escapes.
fn write_string(text: &str, out: &mut String) {
    use std::fmt::Write;
    // Writing into a String cannot fail.
    let _ = write!(out, "{}", tether_protocol::Quoted(text));
}

/// A number as JSON text: integers in full, other numbers in their shortest form that reads
/// back as the same `f64` (serde_json's printer, or in the browser the host's, see
/// [`set_float_printer`]).
pub(crate) fn number_text(number: &Number) -> String {
    if let Some(n) = number.as_u64() {
        return n.to_string();
    }
    if let Some(n) = number.as_i64() {
        return n.to_string();
    }
    float_text(number)
}

#[cfg(not(all(feature = "host-floats", target_arch = "wasm32")))]
fn float_text(number: &Number) -> String {
    number.to_string()
}

/// The printer [`set_float_printer`] installed.
#[cfg(all(feature = "host-floats", target_arch = "wasm32"))]
static FLOAT_PRINTER: std::sync::OnceLock<fn(f64) -> String> = std::sync::OnceLock::new();

#[cfg(all(feature = "host-floats", target_arch = "wasm32"))]
fn float_text(number: &Number) -> String {
    let value = number.as_f64().unwrap_or(f64::NAN);
    match FLOAT_PRINTER.get() {
        Some(print) => print(value),
        // Only an embedder that never installed a printer sees this (in messages).
        None => String::from("(a number)"),
    }
}

/// Feature `host-floats`, in a wasm32 build: numbers that are not integers are printed (in
/// messages, `uniqueItems` keys and `multipleOf` checks) by `printer`, which must write the
/// shortest text that reads back as the same `f64` (JavaScript's `String(number)` does), so
/// that the module carries no float printer of its own. The first call wins. Elsewhere
/// serde_json's printer is always used and this does nothing.
pub fn set_float_printer(printer: fn(f64) -> String) {
    #[cfg(all(feature = "host-floats", target_arch = "wasm32"))]
    let _ = FLOAT_PRINTER.set(printer);
    #[cfg(not(all(feature = "host-floats", target_arch = "wasm32")))]
    let _ = printer;
}

/// `value` as compact JSON text, as `serde_json::to_string` writes it (numbers that are not
/// integers printed by the host, see [`set_float_printer`]): for messages, without serde_json's
/// writer in the browser module.
pub fn to_text(value: &Value) -> String {
    let mut text = String::new();
    write_json(value, &mut text);
    text
}

/// How many bytes `value` takes as compact JSON (what the app-state limits count).
pub(crate) fn json_len(value: &Value) -> usize {
    let mut text = String::new();
    write_json(value, &mut text);
    text.len()
}

/// Renders a value for an error message, cut to a readable length.
pub(crate) fn short(value: &Value) -> String {
    const MAX_CHARS: usize = 60;
    let mut text = String::new();
    write_json(value, &mut text);
    if let Some((cut, _)) = text.char_indices().nth(MAX_CHARS) {
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// The value a JSON Pointer (RFC 6901) points at, as `Value::pointer` finds it.
///
/// Written here because `Value::pointer` unescapes with `str::replace`, which costs the browser
/// module more than this whole function.
pub(crate) fn resolve_pointer<'a>(root: &'a Value, pointer: &str) -> Option<&'a Value> {
    if pointer.is_empty() {
        return Some(root);
    }
    let mut target = root;
    for token in pointer.strip_prefix('/')?.split('/') {
        let mut name = String::with_capacity(token.len());
        let mut chars = token.chars();
        while let Some(c) = chars.next() {
            if c != '~' {
                name.push(c);
                continue;
            }
            match chars.next() {
                Some('1') => name.push('/'),
                Some('0') => name.push('~'),
                // serde_json leaves other tildes as they are.
                other => {
                    name.push('~');
                    name.extend(other);
                }
            }
        }
        target = match target {
            Value::Object(map) => map.get(&name)?,
            Value::Array(items) => {
                if name.starts_with('+') || (name.starts_with('0') && name.len() > 1) {
                    return None;
                }
                items.get(name.parse::<usize>().ok()?)?
            }
            _ => return None,
        };
    }
    Some(target)
}

/// Escapes one JSON Pointer reference token (RFC 6901).
pub(crate) fn escape_pointer_token(token: &str, out: &mut String) {
    for c in token.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
}

/// Whether `value` is a multiple of `divisor`, compared on the numbers' shortest decimal forms
/// so that `0.0075` is a multiple of `0.0001` as a person would expect.
pub(crate) fn is_multiple_of(value: &Number, divisor: &Number) -> bool {
    let (Some((value_digits, value_exp)), Some((divisor_digits, divisor_exp))) = (decimal(value), decimal(divisor))
    else {
        return false;
    };
    if divisor_digits == 0 {
        return false;
    }
    if value_digits == 0 {
        return true;
    }
    if value_exp >= divisor_exp {
        // value / divisor = value_digits * 10^(value_exp - divisor_exp) / divisor_digits
        let mut remainder = value_digits % divisor_digits;
        // Exponents of finite f64 values lie within ±350, so this loop is short.
        for _ in 0..(value_exp - divisor_exp) {
            remainder = times_ten_modulo(remainder, divisor_digits);
        }
        remainder == 0
    } else {
        // value / divisor = value_digits / (divisor_digits * 10^(divisor_exp - value_exp))
        let mut scaled = divisor_digits;
        for _ in 0..(divisor_exp - value_exp) {
            match scaled.checked_mul(10) {
                Some(next) => scaled = next,
                // The divisor is now larger than any value's digits: only zero divides.
                None => return false,
            }
        }
        value_digits % scaled == 0
    }
}

/// `remainder * 10 % modulus` for `remainder < modulus`, without overflowing `u64` (and without
/// 128-bit division, which would add its routine to the browser module).
fn times_ten_modulo(remainder: u64, modulus: u64) -> u64 {
    let mut sum = 0;
    for _ in 0..10 {
        // sum + remainder, modulo modulus; both are below it.
        sum = if sum >= modulus - remainder { sum - (modulus - remainder) } else { sum + remainder };
    }
    sum
}

/// A number as `digits * 10^exponent` with the sign dropped, from its shortest decimal form.
fn decimal(number: &Number) -> Option<(u64, i32)> {
    if let Some(int) = number.as_u64() {
        return Some((int, 0));
    }
    if let Some(int) = number.as_i64() {
        return Some((int.unsigned_abs(), 0));
    }
    // serde_json writes the shortest representation that round-trips: `0.0075`, `7.5e-9`,
    // `1e+300` or `12.5`. (Its own formatter, so the module carries only one float printer.)
    let text = number_text(number);
    let text = text.trim_start_matches('-');
    let (mantissa, exponent) = match text.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, exponent.trim_start_matches('+').parse::<i32>().ok()?),
        None => (text, 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut digits: u64 = 0;
    for byte in int_part.bytes().chain(frac_part.bytes()) {
        digits = digits.checked_mul(10)?.checked_add(u64::from(byte.checked_sub(b'0').filter(|d| *d < 10)?))?;
    }
    Some((digits, exponent - frac_part.len() as i32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn num(value: Value) -> Number {
        match value {
            Value::Number(n) => n,
            _ => unreachable!(),
        }
    }

    #[test]
    fn integral_floats_become_integers() {
        assert_eq!(integer_number(3.0), Some(Number::from(3_u64)));
        assert_eq!(integer_number(-0.0), Some(Number::from(0_u64)));
        assert_eq!(integer_number(-4e18), Some(Number::from(-4_000_000_000_000_000_000_i64)));
        assert_eq!(integer_number(9.3e18), Some(Number::from(9_300_000_000_000_000_000_u64)));
        for not_one in [2.5, 1e20, -1e19, f64::NAN, f64::INFINITY] {
            assert_eq!(integer_number(not_one), None, "{not_one}");
        }
    }

    #[test]
    fn numbers_compare_by_value() {
        assert!(json_equal(&json!(1), &json!(1.0)));
        assert!(json_equal(&json!({"a": [1, 2.0]}), &json!({"a": [1.0, 2]})));
        assert!(!json_equal(&json!(1), &json!(true)));
        assert!(!json_equal(&json!([1]), &json!([1, 1])));
        assert!(is_integer(&num(json!(2.0))));
        assert!(!is_integer(&num(json!(2.5))));
    }

    #[test]
    fn canonical_keys_agree_with_equality() {
        let values = [
            json!(1),
            json!(1.0),
            json!(-0.0),
            json!(0),
            json!({"b": 1, "a": [1.5]}),
            json!({"a": [1.5], "b": 1.0}),
            json!("1"),
            json!(9.3e18),
            json!(9_300_000_000_000_000_000_u64),
            json!(-4e18),
            json!(-4_000_000_000_000_000_000_i64),
            json!(1e20),
            json!(2.5),
        ];
        for a in &values {
            for b in &values {
                let (mut ka, mut kb) = (String::new(), String::new());
                canonical_key(a, &mut ka);
                canonical_key(b, &mut kb);
                assert_eq!(ka == kb, json_equal(a, b), "{a} vs {b}");
            }
        }
    }

    #[test]
    fn multiple_of_is_decimal_exact() {
        assert!(is_multiple_of(&num(json!(0.0075)), &num(json!(0.0001))));
        assert!(!is_multiple_of(&num(json!(0.00751)), &num(json!(0.0001))));
        assert!(is_multiple_of(&num(json!(4.5)), &num(json!(1.5))));
        assert!(!is_multiple_of(&num(json!(35)), &num(json!(1.5))));
        assert!(is_multiple_of(&num(json!(12391239123u64)), &num(json!(1e-8))));
        assert!(!is_multiple_of(&num(json!(1e308)), &num(json!(0.123456789))));
        assert!(is_multiple_of(&num(json!(0)), &num(json!(7))));
        assert!(is_multiple_of(&num(json!(-14)), &num(json!(7))));
        assert!(!is_multiple_of(&num(json!(1)), &num(json!(0))));
        // Digits near u64::MAX: the remainder arithmetic must not overflow.
        assert!(is_multiple_of(&num(json!(18_446_744_073_709_551_615_u64)), &num(json!(5))));
        assert!(!is_multiple_of(&num(json!(1e300)), &num(json!(18_446_744_073_709_551_557_u64))));
        assert!(is_multiple_of(&num(json!(-9_223_372_036_854_775_808_i64)), &num(json!(2))));
        assert_eq!(
            times_ten_modulo(18_446_744_073_709_551_556, 18_446_744_073_709_551_557),
            18_446_744_073_709_551_547
        );
    }

    #[test]
    fn json_text_is_what_serde_json_writes() {
        let values = [
            json!(null),
            json!([true, false, 0, -7, 18_446_744_073_709_551_615_u64, 0.1, 1e300, -2.5e-9, 1.0]),
            json!({"b": "quote \" slash \\ nl \n tab \t cr \r nul \u{0} us \u{1f} del \u{7f} é ✓", "a": {}}),
            json!([[], {"x": [null]}]),
        ];
        for value in values {
            let mut text = String::new();
            write_json(&value, &mut text);
            assert_eq!(text, serde_json::to_string(&value).unwrap());
        }
        // Backspace and form feed are written `\u0008` and `\u000c` (serde_json: `\b`, `\f`): the
        // same string to a reader, 4 bytes more each, so the app-state limit counts them high.
        let mut text = String::new();
        write_json(&json!("bs \u{8} ff \u{c}"), &mut text);
        assert_eq!(text, r#""bs \u0008 ff \u000c""#);
    }

    #[test]
    fn decimal_forms_read_every_float_notation() {
        assert_eq!(decimal(&num(json!(0.0075))), Some((75, -4)));
        assert_eq!(decimal(&num(json!(-12.5))), Some((125, -1)));
        assert_eq!(decimal(&num(json!(7.5e-9))), Some((75, -10)));
        assert_eq!(decimal(&num(json!(1e300))), Some((1, 300)));
        assert_eq!(decimal(&num(json!(3))), Some((3, 0)));
    }

    #[test]
    fn pointers_resolve_as_serde_json_resolves_them() {
        let root = json!({"a": {"b/c": [10, {"~d": true}], "e~1": 1, "": 2}, "list": [0, 1, 2]});
        let pointers = [
            "",
            "/a",
            "/a/b~1c",
            "/a/b~1c/1/~0d",
            "/a/e~01",
            "/a/",
            "/list/2",
            "/list/02",
            "/list/+1",
            "/list/3",
            "/list/x",
            "/missing",
            "a",
            "/a/b~1c/0/deeper",
            "/a/e~1",
            "/a/~2",
            "/a/~",
        ];
        for pointer in pointers {
            assert_eq!(resolve_pointer(&root, pointer), root.pointer(pointer), "{pointer}");
        }
    }

    #[test]
    fn short_renderings_are_cut() {
        assert_eq!(short(&json!("abc")), "\"abc\"");
        assert!(short(&json!("x".repeat(500))).chars().count() <= 61);
    }
}
