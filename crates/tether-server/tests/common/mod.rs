//! Test harness: a real server on 127.0.0.1:0 and a real WebSocket client.

#![allow(dead_code, unreachable_pub)]

pub mod dir;
pub mod nginx;
pub mod proxy;
pub mod redis;
pub mod serve;
pub mod soak;

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tether_agent::AgentLoop;
use tether_protocol::*;
use tether_server::{ServerConfig, TetherServer};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// The highest frame number any client of this process made.
static IDS_MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How long a test waits for a frame before failing.
pub const WAIT: Duration = Duration::from_secs(10);

pub struct TestServer {
    pub addr: std::net::SocketAddr,
    pub server: TetherServer,
    _shutdown: tokio::sync::oneshot::Sender<()>,
}

impl TestServer {
    pub async fn start(config: ServerConfig, agent: AgentLoop) -> TestServer {
        TestServer::start_server(TetherServer::new(config, agent)).await
    }

    pub async fn start_server(server: TetherServer) -> TestServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
        let serving = server.clone();
        tokio::spawn(async move {
            serving
                .serve(listener, async move {
                    let _ = stop.await;
                })
                .await
                .unwrap();
        });
        TestServer { addr, server, _shutdown: shutdown }
    }

    pub fn url(&self) -> String {
        format!("ws://{}/ws", self.addr)
    }

    pub async fn client(&self) -> Client {
        Client::connect(&self.url()).await
    }

    /// `GET /healthz`, as JSON.
    pub async fn health(&self) -> Value {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = TcpStream::connect(self.addr).await.unwrap();
        stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        serde_json::from_str(response.split("\r\n\r\n").nth(1).unwrap_or_default()).unwrap()
    }
}

impl Client {
    /// The answer to a `TOOL_RESULT` for `call_id`: its acknowledgement, or `ERROR unknown_call`.
    pub async fn ack_or_error(&mut self, call_id: &CallId) -> Result<ToolResultAck, ErrorFrame> {
        self.recv_until(|frame| match frame {
            ServerFrame::ToolResultAck(ack) if ack.call_id == *call_id => Some(Ok(ack.clone())),
            ServerFrame::Error(error) if error.code == ErrorCode::UnknownCall => Some(Err(error.clone())),
            _ => None,
        })
        .await
    }
}

pub struct Client {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    pub welcome: Option<Welcome>,
    /// The text of every frame received, as it came.
    pub seen: Vec<String>,
}

impl Client {
    pub async fn connect(url: &str) -> Client {
        let (ws, _) = tokio_tungstenite::connect_async(url).await.expect("connect");
        Client { ws, next_id: 0, welcome: None, seen: Vec::new() }
    }

    pub fn id(&mut self) -> String {
        self.next_id += 1;
        IDS_MADE.fetch_max(self.next_id, std::sync::atomic::Ordering::Relaxed);
        format!("c{}", self.next_id)
    }

    pub async fn send_text(&mut self, text: impl Into<String>) {
        self.ws.send(Message::Text(text.into().into())).await.expect("send");
    }

    pub async fn send(&mut self, frame: ClientFrame) {
        self.send_text(encode_frame(&frame)).await;
    }

    /// The next frame, failing the test after [`WAIT`].
    pub async fn recv(&mut self) -> ServerFrame {
        loop {
            let message = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("timed out waiting for a frame")
                .expect("socket closed")
                .expect("socket error");
            match message {
                Message::Text(text) => {
                    self.seen.push(text.to_string());
                    return decode_server_frame(&text, usize::MAX).expect("server frames decode");
                }
                Message::Close(frame) => panic!("server closed the socket: {frame:?}"),
                _ => continue,
            }
        }
    }

    /// The next frame that `pick` accepts, skipping the others.
    pub async fn recv_until<T>(&mut self, mut pick: impl FnMut(&ServerFrame) -> Option<T>) -> T {
        loop {
            let frame = self.recv().await;
            if let Some(found) = pick(&frame) {
                return found;
            }
        }
    }

    pub async fn error(&mut self) -> ErrorFrame {
        self.recv_until(|f| match f {
            ServerFrame::Error(e) => Some(e.clone()),
            _ => None,
        })
        .await
    }

    pub async fn tool_call(&mut self) -> ToolCall {
        self.recv_until(|f| match f {
            ServerFrame::ToolCall(c) => Some(c.clone()),
            _ => None,
        })
        .await
    }

    /// Text until the run's last AGENT_MESSAGE, and its status.
    pub async fn answer(&mut self) -> (String, RunStatus) {
        let mut text = String::new();
        loop {
            if let ServerFrame::AgentMessage(m) = self.recv().await {
                text.push_str(&m.delta);
                if m.done {
                    return (text, m.status.expect("done carries a status"));
                }
            }
        }
    }

    pub async fn hello(&mut self, resume: Option<Resume>) -> Welcome {
        if resume.is_some() {
            // A page goes on numbering its frames in a session it resumes (the server ignores a
            // `USER_MESSAGE` id it has read): this client, maybe new, goes on after every id made.
            self.next_id = self.next_id.max(IDS_MADE.load(std::sync::atomic::Ordering::Relaxed));
        }
        let id = self.id();
        self.send(ClientFrame::Hello(Hello {
            id,
            protocol_version: PROTOCOL_VERSION,
            resume,
            client: Some("test".into()),
        }))
        .await;
        let welcome = self
            .recv_until(|f| match f {
                ServerFrame::Welcome(w) => Some(w.clone()),
                _ => None,
            })
            .await;
        self.welcome = Some(welcome.clone());
        welcome
    }

    pub fn resume_info(&self) -> Resume {
        let welcome = self.welcome.as_ref().expect("welcomed");
        Resume {
            session_id: welcome.session_id.clone(),
            token: welcome.resume_token.clone(),
            last_seq: None,
            history: false,
        }
    }

    pub async fn context(&mut self, revision: u64, tools: Vec<ToolSpec>) {
        let id = self.id();
        self.send(ClientFrame::ContextUpdate(ContextUpdate { id, revision, tools, page: None, context: Vec::new() }))
            .await;
    }

    pub async fn say(&mut self, text: &str) {
        let id = self.id();
        self.send(ClientFrame::UserMessage(UserMessage { id, text: text.into() })).await;
    }

    pub async fn result(&mut self, call_id: &CallId, status: ResultStatus, content: Value) {
        let id = self.id();
        self.send(ClientFrame::ToolResult(ToolResult { id, call_id: call_id.clone(), status, content })).await;
    }

    pub async fn close(mut self) {
        let _ = self.ws.close(None).await;
    }

    /// Drops the TCP connection without a close handshake, as a crashed network would.
    pub fn kill(self) {
        drop(self);
    }
}

pub fn tool(name: &str, description: &str, parameters: Value) -> ToolSpec {
    ToolSpec::new(name, description).with_parameters(parameters)
}

/// The tools of the storefront's home page.
pub fn storefront_tools() -> Vec<ToolSpec> {
    let ids = json!({"type": "string", "enum": ["mug-red", "mug-blue", "tee-black"]});
    vec![
        tool(
            "product_view",
            "Open a product's page.",
            json!({"type": "object", "properties": {"productId": ids}, "required": ["productId"]}),
        ),
        tool(
            "cart_add",
            "Add a product to the shopping cart.",
            json!({"type": "object", "properties": {"productId": ids, "quantity": {"type": "integer", "minimum": 1, "default": 1}}, "required": ["productId"], "additionalProperties": false}),
        ),
        tool("open_cart", "Open the cart page.", json!({"type": "object"})),
    ]
}

impl Client {
    /// Connects with extra request headers (`Origin`, `Authorization`, …).
    pub async fn connect_with(url: &str, headers: &[(&str, &str)]) -> Client {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
        let mut request = url.into_client_request().expect("a WebSocket URL");
        for (name, value) in headers {
            request
                .headers_mut()
                .insert(HeaderName::from_bytes(name.as_bytes()).unwrap(), HeaderValue::from_str(value).unwrap());
        }
        let (ws, _) = tokio_tungstenite::connect_async(request).await.expect("connect");
        Client { ws, next_id: 0, welcome: None, seen: Vec::new() }
    }

    /// Waits for the server's close frame (skipping other frames) and returns its code and reason.
    pub async fn closed(&mut self) -> (u16, String) {
        loop {
            let message = tokio::time::timeout(WAIT, self.ws.next()).await.expect("timed out waiting for the close");
            match message {
                Some(Ok(Message::Close(Some(frame)))) => return (frame.code.into(), frame.reason.to_string()),
                Some(Ok(Message::Close(None))) => return (1005, String::new()),
                Some(Ok(_)) => continue,
                Some(Err(error)) => panic!("socket error before the close frame: {error}"),
                None => panic!("the socket ended without a close frame"),
            }
        }
    }

    /// Sends a frame and ignores a failure (for a frame sent to a server that may be gone).
    pub async fn send_lossy(&mut self, frame: ClientFrame) {
        let _ = self.ws.send(Message::Text(encode_frame(&frame).into())).await;
    }

    /// Sends a frame's text without waiting for anything.
    pub async fn send_raw(&mut self, text: String) {
        self.ws.send(Message::Text(text.into())).await.expect("send");
    }
}

/// A model for tests that does what the user's message says, and records every request.
///
/// - `call NAME [JSON-ARGS] [xN]`: calls the tool NAME (N times in one reply), then, once the
///   results are in, answers `done: <last result>`.
/// - `loop NAME`: calls NAME every turn, never answering.
/// - anything else: answers `ok`.
#[derive(Default, Clone)]
pub struct DirectModel {
    pub requests: std::sync::Arc<std::sync::Mutex<Vec<tether_agent::ChatRequest>>>,
}

impl DirectModel {
    pub fn requests(&self) -> Vec<tether_agent::ChatRequest> {
        self.requests.lock().unwrap().clone()
    }

    fn reply(request: &tether_agent::ChatRequest) -> tether_agent::ModelReply {
        use tether_agent::{ChatMessage, ModelReply, ModelToolCall};
        let text = |t: String| ModelReply { text: t, ..ModelReply::default() };
        let Some(position) = request.messages.iter().rposition(ChatMessage::is_users_own) else {
            return text("ok".into());
        };
        let ChatMessage::User { content } = &request.messages[position] else { unreachable!() };
        let words: Vec<&str> = content.split_whitespace().collect();
        let results: Vec<&str> = request.messages[position..]
            .iter()
            .filter_map(|m| match m {
                ChatMessage::Tool { content, .. } => Some(content.as_str()),
                _ => None,
            })
            .collect();
        match words.as_slice() {
            ["loop", name] => ModelReply {
                text: String::new(),
                tool_calls: vec![ModelToolCall { id: "l".into(), name: (*name).into(), arguments: json!({}) }],
                ..ModelReply::default()
            },
            ["call", name, rest @ ..] if results.is_empty() => {
                let (times, args) = match rest.last().and_then(|w| w.strip_prefix('x')).and_then(|n| n.parse().ok()) {
                    Some(times) => (times, &rest[..rest.len() - 1]),
                    None => (1, rest),
                };
                let arguments =
                    if args.is_empty() { json!({}) } else { serde_json::from_str(&args.join(" ")).unwrap() };
                let tool_calls = (0..times)
                    .map(|n| ModelToolCall {
                        id: format!("d{n}").into(),
                        name: (*name).into(),
                        arguments: arguments.clone(),
                    })
                    .collect();
                ModelReply { tool_calls, ..ModelReply::default() }
            }
            ["call", ..] => text(format!("done: {}", results.last().unwrap())),
            _ => text("ok".into()),
        }
    }
}

impl tether_agent::ChatModel for DirectModel {
    fn name(&self) -> &str {
        "direct (test)"
    }

    fn complete<'a>(
        &'a self,
        request: &'a tether_agent::ChatRequest,
        on_delta: tether_agent::DeltaSink<'a>,
    ) -> tether_agent::BoxFuture<'a, Result<tether_agent::ModelReply, tether_agent::AgentError>> {
        self.requests.lock().unwrap().push(request.clone());
        let reply = DirectModel::reply(request);
        Box::pin(async move {
            on_delta(&reply.text);
            Ok(reply)
        })
    }
}

/// An OpenAI-compatible provider on 127.0.0.1:0 that records every request body and answers
/// each with the assistant message `reply` makes of it. Returns its base URL and the bodies.
pub async fn recording_provider(
    reply: impl Fn(&Value) -> Value + Clone + Send + Sync + 'static,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<Value>>>) {
    use axum::response::IntoResponse;
    let seen: std::sync::Arc<std::sync::Mutex<Vec<Value>>> = std::sync::Arc::default();
    let recorded = seen.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |body: String| {
            let (recorded, reply) = (recorded.clone(), reply.clone());
            async move {
                let body: Value = serde_json::from_str(&body).unwrap();
                let message = reply(&body);
                recorded.lock().unwrap().push(body);
                axum::Json(json!({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}))
                    .into_response()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, seen)
}

/// One storefront run that adds the red mug: the call, its result, the answer (completed). Its
/// answer.
pub async fn add_the_red_mug(client: &mut Client) -> String {
    client.say("add the red mug to my cart").await;
    let call = client.tool_call().await;
    assert_eq!((call.name.as_str(), &call.args), ("cart_add", &json!({"productId": "mug-red"})));
    client.result(&call.call_id, ResultStatus::Ok, json!("added 1 x Red mug; cart: 1 item")).await;
    let (answer, status) = client.answer().await;
    assert_eq!(status, RunStatus::Completed, "{answer}");
    answer
}

/// The page's tools (revision `revision`), then [`add_the_red_mug`]: the session is healthy.
pub async fn run_works(client: &mut Client, revision: u64) {
    client.context(revision, storefront_tools()).await;
    add_the_red_mug(client).await;
}
