//! The WebSocket transport: connect, say HELLO, pump frames both ways, and reconnect with
//! exponential backoff and jitter until the client is disconnected on purpose.

use futures_util::future::{Either, select};
use futures_util::{SinkExt, StreamExt};
use gloo_net::websocket::Message;
use gloo_net::websocket::futures::WebSocket;

use crate::client::{Client, ConnectionState, Outgoing};
use crate::time::sleep_ms;

/// The delay before reconnect attempt `attempt` (1-based): base × 2^(attempt-1), capped, ±50 %.
pub(crate) fn backoff_ms(base: u32, max: u32, attempt: u32, random: f64) -> u32 {
    let exponential = u64::from(base) << attempt.saturating_sub(1).min(16);
    let capped = exponential.min(u64::from(max)) as f64;
    (capped * (0.5 + random)).round() as u32
}

/// Runs the connection until [`Client::disconnect`].
pub(crate) async fn run(client: Client) {
    while client.is_running() {
        client.set_state(ConnectionState::Connecting);
        match WebSocket::open(&client.config().url) {
            Ok(socket) => pump(&client, socket).await,
            Err(error) => client.connection_error(format!("cannot open {}: {error}", client.config().url)),
        }
        client.detach();
        if !client.is_running() {
            break;
        }
        client.set_state(ConnectionState::Reconnecting);
        let config = client.config();
        let delay =
            backoff_ms(config.reconnect_base_ms, config.reconnect_max_ms, client.attempt(), js_sys::Math::random());
        sleep_ms(delay).await;
    }
}

/// Moves frames between the socket and the client until the socket closes.
async fn pump(client: &Client, mut socket: WebSocket) {
    let (sender, mut outgoing) = futures_channel::mpsc::unbounded::<Outgoing>();
    client.attach(sender);
    loop {
        let next = match select(socket.next(), outgoing.next()).await {
            Either::Left((incoming, _)) => Either::Left(incoming),
            Either::Right((outgoing, _)) => Either::Right(outgoing),
        };
        match next {
            Either::Left(Some(Ok(Message::Text(text)))) => client.receive(&text),
            Either::Left(Some(Ok(Message::Bytes(_)))) => {}
            Either::Left(Some(Err(_)) | None) => return,
            Either::Right(Some(Outgoing::Text(text))) => {
                if socket.send(Message::Text(text)).await.is_err() {
                    return;
                }
            }
            Either::Right(Some(Outgoing::Close)) => {
                let _ = socket.close(Some(1000), Some("client closed"));
                return;
            }
            // The client dropped the sender (a newer socket replaced this one).
            Either::Right(None) => return,
        }
    }
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
        assert!(backoff_ms(250, 10_000, 1, 0.999) < 375);
    }
}
