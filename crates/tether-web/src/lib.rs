//! The Tether browser runtime, compiled to WebAssembly.

mod regex;

pub use regex::{BrowserRegex, JsRegex};
