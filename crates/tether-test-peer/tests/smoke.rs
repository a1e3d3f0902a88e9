//! The test peer answers a HELLO with a WELCOME and runs a `contexts` command, so the browser
//! tests can rely on it (this also builds the binary they start).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use futures_util::{SinkExt, StreamExt};
use tether_protocol::*;
use tokio_tungstenite::tungstenite::Message;

#[tokio::test]
async fn the_peer_welcomes_and_answers_commands() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tether-test-peer"))
        .arg("127.0.0.1:0")
        .stderr(Stdio::piped())
        .spawn()
        .expect("the peer starts");
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.split_whitespace().find(|w| w.starts_with("ws://")).expect("the peer prints its URL").to_string();
    let (mut socket, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    let hello =
        ClientFrame::Hello(Hello { id: "h".into(), protocol_version: PROTOCOL_VERSION, resume: None, client: None });
    socket.send(Message::Text(encode_frame(&hello).into())).await.unwrap();
    let next = |text: Message| decode_server_frame(text.to_text().unwrap(), usize::MAX).unwrap();
    assert!(matches!(next(socket.next().await.unwrap().unwrap()), ServerFrame::Welcome(_)));
    let ask = ClientFrame::UserMessage(UserMessage { id: "u".into(), text: "contexts".into() });
    socket.send(Message::Text(encode_frame(&ask).into())).await.unwrap();
    match next(socket.next().await.unwrap().unwrap()) {
        ServerFrame::AgentMessage(answer) => assert_eq!(answer.delta, r#"{"contexts":0,"tools":[]}"#),
        other => panic!("{other:?}"),
    }
    child.kill().unwrap();
    child.wait().unwrap();
}
