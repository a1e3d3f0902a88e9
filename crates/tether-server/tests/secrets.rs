//! The provider's API key never leaves the provider request: an end-to-end run of the real
//! `tether` binary with a sentinel key, every log line at `trace`, declarative hooks that dump
//! their environment and copy their transcripts, and a provider that echoes the key in an error.
//! The sentinel must appear in none of the logs, frames, transcripts or hook environments, and
//! in every request the provider received.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use common::serve::Serve;
use common::*;
use serde_json::{Value, json};
use tether_protocol::*;

const SENTINEL: &str = "sk-SENTINEL-5f3a9c1e-never-leak";

/// The provider: asks for `cart_view`, then answers; approves as a judge; answers "leak please"
/// with a 401 that echoes the key, as some providers do.
async fn provider() -> (String, Arc<Mutex<Vec<String>>>) {
    let authorizations: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = authorizations.clone();
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move |headers: HeaderMap, body: String| {
            let seen = seen.clone();
            async move {
                let authorization = headers.get("authorization").map(|v| v.to_str().unwrap().to_string());
                seen.lock().unwrap().push(authorization.unwrap_or_default());
                let body: Value = serde_json::from_str(&body).unwrap();
                let messages = body["messages"].as_array().unwrap();
                let text_of = |m: &Value| m["content"].as_str().unwrap_or_default().to_string();
                let reply =
                    |message: Value| axum::Json(json!({"choices": [{"index": 0, "message": message}]})).into_response();
                if text_of(&messages[0]).starts_with("You are a hook") {
                    return reply(json!({"role": "assistant", "content": "{\"ok\": true}"}));
                }
                let asked = messages.iter().rev().find(|m| m["role"] == "user").map(text_of).unwrap_or_default();
                if asked == "leak please" {
                    let error = json!({"error": {"message": format!("Incorrect API key provided: {SENTINEL}.")}});
                    return (StatusCode::UNAUTHORIZED, axum::Json(error)).into_response();
                }
                if messages.iter().any(|m| m["role"] == "tool") {
                    reply(json!({"role": "assistant", "content": "Your cart has one mug."}))
                } else {
                    reply(json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                        "function": {"name": "cart_view", "arguments": "{}"}}]}))
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, authorizations)
}

/// A command hook script that saves its environment, its context and a copy of its transcript.
fn dump_script(dir: &Path, name: &str) -> String {
    let d = dir.display();
    format!(
        "#!/bin/bash\n\
         input=$(cat)\n\
         env > {d}/env-{name}.txt\n\
         printf '%s' \"$input\" > {d}/context-{name}.json\n\
         summary=$(printf '%s' \"$input\" | grep -o '\"execution_summary\": *\"[^\"]*\"' | sed 's/.*\"\\([^\"]*\\)\"$/\\1/')\n\
         cp \"$summary\" {d}/transcript-{name}.txt\n\
         echo '{{\"decision\": \"allow\"}}'\n"
    )
}

fn indent(text: &str) -> String {
    text.lines().map(|line| format!("        {line}\n")).collect()
}

/// The server process, killed however the test ends.
/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files(&path));
        } else {
            found.push(path);
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_key_appears_in_no_log_frame_transcript_or_hook_environment() {
    let root = std::env::temp_dir().join(format!("tether-secrets-test-{}", std::process::id()));
    let (dumps, tmp) = (root.join("dumps"), root.join("tmp"));
    std::fs::create_dir_all(&dumps).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    let hooks = root.join("hooks.yaml");
    let yaml = format!(
        "hooks:\n  PostToolUse:\n    - type: command\n      matcher: \"*\"\n      script: |\n{}  Stop:\n    - type: command\n      script: |\n{}    - type: prompt\n      prompt: \"Is the answer complete? $ARGUMENTS\"\n",
        indent(&dump_script(&dumps, "post")),
        indent(&dump_script(&dumps, "stop")),
    );
    std::fs::write(&hooks, yaml).unwrap();

    let (base, authorizations) = provider().await;
    let served = Serve::new()
        .args(["--model", base.as_str(), "--no-question-check", "--api-key-env", "TETHER_TEST_API_KEY"])
        .args([std::ffi::OsStr::new("--hooks"), hooks.as_os_str()])
        .env("TETHER_TEST_API_KEY", SENTINEL)
        .env("RUST_LOG", "trace")
        .env("TMPDIR", &tmp)
        .capture_logs()
        .start();

    let mut client = Client::connect(&served.url()).await;
    client.hello(None).await;
    client.context(1, vec![tool("cart_view", "Show the cart.", json!({"type": "object"}))]).await;
    client.say("what is in my cart?").await;
    let call = client.tool_call().await;
    client.result(&call.call_id, ResultStatus::Ok, json!("one red mug")).await;
    assert_eq!(client.answer().await, ("Your cart has one mug.".to_string(), RunStatus::Completed));
    // The provider echoes the key in its error: the run fails, and the message is scrubbed.
    client.say("leak please").await;
    let error = client.error().await;
    assert_eq!(client.answer().await.1, RunStatus::Failed);
    assert_eq!(error.code, ErrorCode::RunFailed);
    assert!(error.message.contains("Incorrect API key provided: [redacted]"), "{}", error.message);
    // Every request carried the key (the test would prove nothing otherwise): the agent's and
    // the prompt hook's.
    let authorizations = authorizations.lock().unwrap().clone();
    assert!(authorizations.len() >= 4, "{authorizations:?}");
    assert!(authorizations.iter().all(|a| *a == format!("Bearer {SENTINEL}")), "{authorizations:?}");

    // Transcripts as the server keeps them (in its hooks directory), before it stops.
    let server_files = files(&tmp);
    assert!(server_files.iter().any(|p| p.to_string_lossy().contains("transcripts")), "{server_files:?}");
    let mut checked: Vec<(String, String)> = server_files
        .iter()
        .map(|path| (path.display().to_string(), std::fs::read_to_string(path).unwrap_or_default()))
        .collect();
    let logs = served.stop_and_read_logs();
    assert!(logs.contains("TRACE") && logs.contains("DEBUG"), "the logs were not captured at trace level");

    for name in ["env-post.txt", "env-stop.txt", "context-post.json", "transcript-post.txt", "transcript-stop.txt"] {
        let path = dumps.join(name);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!text.is_empty(), "{name} is empty");
        checked.push((name.to_string(), text));
    }
    assert!(checked.iter().any(|(name, text)| name == "env-post.txt" && text.contains("PATH=")));
    assert!(checked.iter().any(|(name, text)| name == "transcript-stop.txt" && text.contains("one red mug")));
    checked.push(("server logs".into(), logs));
    checked.push(("frames".into(), client.seen.join("\n")));
    for (what, text) in &checked {
        assert!(!text.contains(SENTINEL), "the API key leaked into {what}");
        assert!(!text.contains("SENTINEL"), "part of the API key leaked into {what}");
    }
    let _ = std::fs::remove_dir_all(&root);
}
