//! `--static` pages over a real socket as a CDN would serve them: a precompressed sibling when
//! the browser accepts its encoding, compression as sent otherwise, `Vary`, a year's
//! `immutable` cache for content-hashed names and revalidation (`ETag` → `304`) for the rest,
//! `application/wasm`, and `index.html` for the app's own routes.

mod common;

use std::io::{Read, Write};
use std::sync::Arc;

use common::TestServer;
use common::dir::TestDir;
use tether_agent::AgentLoop;
use tether_scripted::ScriptedModel;
use tether_server::{ServerConfig, TetherServer};

const INDEX: &str = "<!doctype html><title>shop</title><script type=module src=/assets/index-D3kX9a1b.js></script>";

fn brotli(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut writer = brotli::CompressorWriter::new(&mut out, 4096, 9, 22);
        writer.write_all(bytes).unwrap();
    }
    out
}

fn unbrotli(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    brotli::Decompressor::new(bytes, 4096).read_to_end(&mut out).unwrap();
    out
}

fn ungzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).unwrap();
    out
}

/// A built app: an index, a hashed script with a precompressed sibling that says so, and a wasm
/// module without one.
async fn serve_app(name: &str) -> (TestServer, TestDir, Vec<u8>) {
    let dir = TestDir::new(name);
    std::fs::create_dir_all(dir.file("assets")).unwrap();
    std::fs::write(dir.file("index.html"), INDEX).unwrap();
    let script = "export const line = 'the script as built';\n".repeat(100);
    std::fs::write(dir.file("assets/index-D3kX9a1b.js"), &script).unwrap();
    // Different words, so the test sees which one was sent.
    let sibling = "export const line = 'the precompressed copy';\n".repeat(100);
    std::fs::write(dir.file("assets/index-D3kX9a1b.js.br"), brotli(sibling.as_bytes())).unwrap();
    let mut wasm = b"\0asm\x01\0\0\0".to_vec();
    wasm.extend(std::iter::repeat_n(b"(module data) ".as_slice(), 300).flatten());
    std::fs::write(dir.file("app_bg.wasm"), &wasm).unwrap();
    let server = TetherServer::new(ServerConfig::default(), AgentLoop::new(Arc::new(ScriptedModel::default())))
        .with_static_dir(dir.0.clone());
    (TestServer::start_server(server).await, dir, wasm)
}

async fn get(server: &TestServer, path: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    // reqwest is built without decompression: the test sees the bytes as sent. (Built with
    // rustls and no crypto provider in this workspace: ring is the one shipped.)
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut request = reqwest::Client::new().get(format!("http://{}{path}", server.addr));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

fn header(response: &reqwest::Response, name: &str) -> String {
    response.headers().get(name).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default()
}

#[tokio::test]
async fn a_precompressed_sibling_is_sent_to_a_browser_that_accepts_it_and_hashed_names_are_immutable() {
    let (server, _dir, _) = serve_app("static-sibling").await;
    let response = get(&server, "/assets/index-D3kX9a1b.js", &[("accept-encoding", "gzip, deflate, br")]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-encoding"), "br");
    assert!(header(&response, "vary").to_ascii_lowercase().contains("accept-encoding"));
    assert_eq!(header(&response, "cache-control"), "public, max-age=31536000, immutable");
    assert!(header(&response, "content-type").starts_with("text/javascript"), "{}", header(&response, "content-type"));
    let body = unbrotli(&response.bytes().await.unwrap());
    assert!(String::from_utf8(body).unwrap().contains("the precompressed copy"), "the sibling was sent");

    // A browser that takes only gzip: no gzip sibling, so the file is compressed as it is sent.
    let response = get(&server, "/assets/index-D3kX9a1b.js", &[("accept-encoding", "gzip")]).await;
    assert_eq!(header(&response, "content-encoding"), "gzip");
    let body = ungzip(&response.bytes().await.unwrap());
    assert!(String::from_utf8(body).unwrap().contains("the script as built"));

    // One that takes none: the file as it is.
    let response = get(&server, "/assets/index-D3kX9a1b.js", &[]).await;
    assert_eq!(header(&response, "content-encoding"), "");
    assert!(response.text().await.unwrap().starts_with("export const line = 'the script as built';"));
}

#[tokio::test]
async fn other_files_are_compressed_as_sent_and_revalidated_with_their_etag() {
    let (server, _dir, wasm) = serve_app("static-revalidate").await;
    let response = get(&server, "/app_bg.wasm", &[("accept-encoding", "gzip")]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-type"), "application/wasm", "browsers compile it while it downloads");
    assert_eq!(header(&response, "content-encoding"), "gzip");
    assert_eq!(header(&response, "cache-control"), "no-cache");
    let sent = response.bytes().await.unwrap();
    assert!(sent.len() < wasm.len() / 4, "{} of {} bytes", sent.len(), wasm.len());
    assert_eq!(ungzip(&sent), wasm);

    let index = get(&server, "/", &[("accept-encoding", "br")]).await;
    assert_eq!(index.status(), 200);
    assert_eq!(header(&index, "cache-control"), "no-cache");
    let etag = header(&index, "etag");
    assert!(!etag.is_empty(), "index.html has an ETag");
    let again = get(&server, "/", &[("accept-encoding", "br"), ("if-none-match", &etag)]).await;
    assert_eq!(again.status(), 304, "a reload that finds nothing changed");
    assert!(again.bytes().await.unwrap().is_empty());
}

#[tokio::test]
async fn the_apps_own_routes_get_index_html_never_cached_as_immutable() {
    let (server, _dir, _) = serve_app("static-routes").await;
    for path in ["/cart", "/product/mug-red", "/assets/gone-D3kX9a1b.js"] {
        let response = get(&server, path, &[]).await;
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(header(&response, "cache-control"), "no-cache", "{path}");
        assert_eq!(response.text().await.unwrap(), INDEX, "{path}");
    }
    // The server's own routes are not files.
    let health = get(&server, "/healthz", &[]).await;
    assert_eq!(health.status(), 200);
    assert!(header(&health, "content-type").starts_with("application/json"));
}
