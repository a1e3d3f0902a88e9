//! The WebSocket transport: open a socket, say HELLO once it is open, hand every text frame to
//! the client, and reconnect with exponential backoff and jitter until the client is
//! disconnected on purpose.
//!
//! The browser's `WebSocket` is used directly through `web-sys` callbacks: the runtime only
//! needs open, message and close, and a stream/sink wrapper (gloo-net) with a channel and a
//! `select` loop cost the module about 3 kB gzip more.

use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use wasm_bindgen_futures::spawn_local;
use web_sys::{MessageEvent, WebSocket};

use crate::client::Client;
use crate::events::ConnectionState;
use crate::time::sleep_ms;

/// The delay before reconnect attempt `attempt` (1-based): base × 2^(attempt-1), capped, ±50 %.
pub(crate) fn backoff_ms(base: u32, max: u32, attempt: u32, random: f64) -> u32 {
    let exponential = u64::from(base) << attempt.saturating_sub(1).min(16);
    let capped = exponential.min(u64::from(max)) as f64;
    (capped * (0.5 + random)).round() as u32
}

/// The client's socket and the callbacks that feed it. Dropping it detaches the callbacks, so
/// a socket that was replaced or closed on purpose never calls into the client again.
pub(crate) struct Socket {
    socket: WebSocket,
    /// Whether `open` fired: frames can be sent.
    pub(crate) open: bool,
    _on_open: Closure<dyn FnMut()>,
    _on_message: Closure<dyn FnMut(MessageEvent)>,
    _on_close: Closure<dyn FnMut()>,
}

impl Socket {
    /// Sends one text frame; `false` when the socket refused it (it is closing).
    pub(crate) fn send(&self, text: &str) -> bool {
        self.open && self.socket.send_with_str(text).is_ok()
    }

    /// Closes the socket on purpose (normal closure).
    pub(crate) fn close(&self) {
        let _ = self.socket.close_with_code_and_reason(1000, "client closed");
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        self.socket.set_onopen(None);
        self.socket.set_onmessage(None);
        self.socket.set_onclose(None);
    }
}

/// Opens a socket for the client (state `connecting`). On failure to even create it (a bad
/// URL), the error is reported and a reconnect is scheduled, as after a close.
pub(crate) fn open(client: &Client) {
    client.set_state(ConnectionState::Connecting);
    let url = &client.config().url;
    let socket = match WebSocket::new(url) {
        Ok(socket) => socket,
        Err(error) => {
            let reason = crate::js_error_message(&error).unwrap_or_default();
            client.connection_error(format!("cannot open {url}: {reason}"));
            closed(client);
            return;
        }
    };
    let on_open = {
        let client = client.clone();
        Closure::<dyn FnMut()>::new(move || client.attach())
    };
    let on_message = {
        let client = client.clone();
        Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
            // Binary frames are not part of the protocol; they are ignored.
            if let Some(text) = event.data().as_string() {
                client.receive(&text);
            }
        })
    };
    let on_close = {
        let client = client.clone();
        Closure::<dyn FnMut()>::new(move || closed(&client))
    };
    socket.set_onopen(Some(on_open.as_ref().unchecked_ref()));
    socket.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    // An `error` event is always followed by `close`, which is where the client reacts.
    socket.set_onclose(Some(on_close.as_ref().unchecked_ref()));
    client.set_socket(Socket { socket, open: false, _on_open: on_open, _on_message: on_message, _on_close: on_close });
}

/// The socket closed (or could not be created): forget it, and reconnect after a backoff
/// unless the client was disconnected on purpose.
fn closed(client: &Client) {
    client.detach();
    if !client.is_running() {
        return;
    }
    client.set_state(ConnectionState::Reconnecting);
    let config = client.config();
    let delay = backoff_ms(config.reconnect_base_ms, config.reconnect_max_ms, client.attempt(), js_sys::Math::random());
    let client = client.clone();
    spawn_local(async move {
        sleep_ms(delay).await;
        // A `disconnect()` (or a `connect()` after it) during the wait decides instead.
        if client.is_running() && !client.has_socket() {
            open(&client);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::backoff_ms;

    #[test]
    fn backoff_doubles_is_capped_and_jittered() {
        assert_eq!(backoff_ms(250, 10_000, 1, 0.5), 250);
        assert_eq!(backoff_ms(250, 10_000, 3, 0.5), 1000);
        assert_eq!(backoff_ms(250, 10_000, 30, 0.5), 10_000);
        assert_eq!(backoff_ms(250, 10_000, 1, 0.0), 125);
        assert!(backoff_ms(250, 10_000, 1, 0.999) <= 375);
    }
}
