//! JSON values across the wasm boundary: `serde_json::Value` to and from JavaScript values.
//!
//! The browser parses and writes JSON text itself (`JSON.parse`, `JSON.stringify`); the
//! runtime only walks the resulting values. Keeping serde_json's text parser and writer out of
//! the module is a large part of the runtime's size budget (see README, "Sizes").

use js_sys::{Array, JSON, Object, Reflect};
use serde_json::{Map, Number, Value};
use wasm_bindgen::{JsCast, JsValue};

/// How deep a JavaScript value may nest before it is refused (a cycle would never end).
const MAX_DEPTH: u32 = 256;

/// Converts a JSON value to a JavaScript value (objects, arrays, strings, numbers, booleans, null).
pub fn to_js(value: &Value) -> JsValue {
    match value {
        Value::Null => JsValue::NULL,
        Value::Bool(flag) => JsValue::from_bool(*flag),
        Value::Number(number) => JsValue::from_f64(number.as_f64().unwrap_or(f64::NAN)),
        Value::String(text) => JsValue::from_str(text),
        Value::Array(items) => items.iter().map(to_js).collect::<Array>().into(),
        Value::Object(map) => {
            let object = Object::new();
            for (key, item) in map {
                // Setting a property on a fresh plain object cannot fail.
                let _ = Reflect::set(&object, &JsValue::from_str(key), &to_js(item));
            }
            object.into()
        }
    }
}

/// Converts a JavaScript value to JSON as `JSON.stringify` would see it: `toJSON` is honoured
/// (dates become strings), `undefined`, functions and symbols are left out of objects and
/// become `null` in arrays, and non-finite numbers become `null`. A `BigInt`, a value nested
/// deeper than 256 levels (or a cycle) and an `undefined` top level are refused.
pub fn from_js(value: &JsValue) -> Result<Value, String> {
    match convert(value, 0)? {
        Some(value) => Ok(value),
        None => Err("the value is undefined or a function, not JSON".into()),
    }
}

/// Parses JSON text with the browser's `JSON.parse`.
pub(crate) fn parse(text: &str) -> Result<Value, String> {
    let value = JSON::parse(text)
        .map_err(|error| format!("not JSON: {}", crate::js_error_message(&error).unwrap_or_default()))?;
    from_js(&value)
}

/// Writes JSON text with the browser's `JSON.stringify`.
pub(crate) fn stringify(value: &Value) -> String {
    // Stringifying plain objects, arrays and primitives cannot fail.
    JSON::stringify(&to_js(value)).ok().and_then(|text| text.as_string()).unwrap_or_else(|| "null".into())
}

/// A JSON number for a JavaScript number: integers stay integers (so `as_u64` reads them).
fn number(float: f64) -> Value {
    tether_core::integer_number(float).or_else(|| Number::from_f64(float)).map_or(Value::Null, Value::Number)
}

/// `None` is what `JSON.stringify` leaves out: `undefined`, functions, symbols.
fn convert(value: &JsValue, depth: u32) -> Result<Option<Value>, String> {
    if depth > MAX_DEPTH {
        return Err(format!("the value nests deeper than {} levels (or is cyclic)", u64::from(MAX_DEPTH)));
    }
    if value.is_undefined() || value.is_function() || value.is_symbol() {
        return Ok(None);
    }
    if value.is_null() {
        return Ok(Some(Value::Null));
    }
    if let Some(flag) = value.as_bool() {
        return Ok(Some(Value::Bool(flag)));
    }
    if let Some(float) = value.as_f64() {
        return Ok(Some(number(float)));
    }
    if let Some(text) = value.as_string() {
        return Ok(Some(Value::String(text)));
    }
    if value.is_bigint() {
        return Err("a BigInt is not JSON".into());
    }
    if let Ok(to_json) = Reflect::get(value, &JsValue::from_str("toJSON")) {
        if let Some(to_json) = to_json.dyn_ref::<js_sys::Function>() {
            let replaced = to_json.call0(value).map_err(|_| "toJSON() threw".to_string())?;
            return convert(&replaced, depth + 1);
        }
    }
    if Array::is_array(value) {
        let array: &Array = value.unchecked_ref();
        let mut items = Vec::with_capacity(array.length() as usize);
        for item in array.iter() {
            items.push(convert(&item, depth + 1)?.unwrap_or(Value::Null));
        }
        return Ok(Some(Value::Array(items)));
    }
    // Boxed primitives (`new String("x")`) unwrap as `JSON.stringify` does.
    let object: &Object = value.unchecked_ref();
    if value.is_instance_of::<js_sys::JsString>()
        || value.is_instance_of::<js_sys::Number>()
        || value.is_instance_of::<js_sys::Boolean>()
    {
        return convert(&object.value_of().into(), depth + 1);
    }
    let mut map = Map::new();
    for key in Object::keys(object).iter() {
        let Some(name) = key.as_string() else { continue };
        let item = Reflect::get(object, &key)
            .map_err(|_| format!("reading property {} threw", tether_protocol::Quoted(&name)))?;
        if let Some(item) = convert(&item, depth + 1)? {
            map.insert(name, item);
        }
    }
    Ok(Some(Value::Object(map)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use wasm_bindgen::JsValue;
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;

    fn eval(source: &str) -> JsValue {
        js_sys::eval(source).expect("the test expression runs")
    }

    #[wasm_bindgen_test]
    fn values_survive_the_round_trip_through_javascript() {
        let value = json!({
            "text": "quote \" é ✓", "int": 42, "negative": -7, "float": 0.25, "big": 9_007_199_254_740_991_u64,
            "list": [null, true, false, [], {}], "nested": {"a": {"b": [1, 2.5]}}
        });
        let back = from_js(&to_js(&value)).unwrap();
        assert_eq!(back, value);
        // Integers stay integers, so the protocol decoders can read them as such.
        assert!(back["int"].is_u64() && back["negative"].is_i64());
        assert_eq!(parse(&stringify(&value)).unwrap(), value);
    }

    #[wasm_bindgen_test]
    fn javascript_values_convert_as_json_stringify_sees_them() {
        let value = eval(
            "({ date: new Date(0), skipped: undefined, f() {}, list: [undefined, () => 1, NaN, Infinity], \
               boxed: [new String('s'), new Number(2), new Boolean(false)], ['x' + 1]: 'computed' })",
        );
        let expected = json!({
            "date": "1970-01-01T00:00:00.000Z", "list": [null, null, null, null],
            "boxed": ["s", 2, false], "x1": "computed"
        });
        assert_eq!(from_js(&value).unwrap(), expected);
    }

    #[wasm_bindgen_test]
    fn what_is_not_json_is_refused_with_a_reason() {
        assert!(from_js(&JsValue::UNDEFINED).unwrap_err().contains("undefined"));
        assert!(from_js(&eval("({ n: 1n })")).unwrap_err().contains("BigInt"));
        let cyclic = eval("(() => { const a = { name: 'a' }; a.self = a; return a; })()");
        assert!(from_js(&cyclic).unwrap_err().contains("cyclic"));
        assert!(from_js(&eval("({ get boom() { throw new Error('no'); } })")).unwrap_err().contains("boom"));
        assert!(parse("{not json").unwrap_err().starts_with("not JSON: "));
    }
}
