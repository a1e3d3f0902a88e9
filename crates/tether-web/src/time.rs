//! Time in the browser (and Node): the clock, timers and the next animation frame, as futures.

use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(callback: &js_sys::Function, ms: i32) -> JsValue;
    #[wasm_bindgen(js_name = requestAnimationFrame, catch)]
    fn request_animation_frame(callback: &js_sys::Function) -> Result<JsValue, JsValue>;
}

/// Milliseconds since the epoch.
pub(crate) fn now_ms() -> u64 {
    js_sys::Date::now() as u64
}

/// A future that resolves after `ms` milliseconds.
pub(crate) async fn sleep_ms(ms: u32) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        set_timeout(&resolve, ms.min(i32::MAX as u32) as i32);
    });
    let _ = JsFuture::from(promise).await;
}

/// A future that resolves at the next animation frame, or after 16 ms where there are no
/// frames (Node, hidden tabs); whichever comes first.
pub(crate) async fn next_frame() {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        let _ = request_animation_frame(&resolve);
        set_timeout(&resolve, 16);
    });
    let _ = JsFuture::from(promise).await;
}

/// Lets every queued microtask run (registrations made in this tick are flushed by then).
pub(crate) async fn yield_microtasks() {
    let _ = JsFuture::from(js_sys::Promise::resolve(&JsValue::UNDEFINED)).await;
}
