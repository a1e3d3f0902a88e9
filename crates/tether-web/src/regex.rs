//! `pattern` through the browser's own `RegExp`, with the `u` flag as JSON Schema asks.

use tether_core::validate::{CompiledRegex, RegexEngine};
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    /// `new RegExp(pattern, flags)`, catching the `SyntaxError` of an invalid pattern.
    #[wasm_bindgen(catch, js_namespace = globalThis, js_name = RegExp)]
    fn new_regexp(pattern: &str, flags: &str) -> Result<js_sys::RegExp, JsValue>;
}

/// A [`RegexEngine`] that compiles patterns with the browser's `RegExp` (flag `u`). Numbers in
/// `multipleOf` and in messages need [`crate::install_float_printer`] (a [`crate::Client`] installs it).
#[derive(Debug, Clone, Copy, Default)]
pub struct BrowserRegex;

/// A compiled browser `RegExp`.
#[derive(Debug, Clone)]
pub struct JsRegex(js_sys::RegExp);

impl RegexEngine for BrowserRegex {
    type Regex = JsRegex;

    fn compile(&self, pattern: &str) -> Result<JsRegex, String> {
        new_regexp(pattern, "u")
            .map(JsRegex)
            .map_err(|error| crate::js_error_message(&error).unwrap_or_else(|| "invalid pattern".into()))
    }
}

impl CompiledRegex for JsRegex {
    fn is_match(&self, text: &str) -> bool {
        self.0.test(text)
    }
}
