//! What docs/deploy.md gives an operator, run. Debian's nginx in front of two `tether serve` instances on one Redis, configured by the file
//! docs/deploy.md gives (`deploy/nginx/tether.conf`): plain HTTP is redirected to HTTPS; the
//! app's precompressed files and cache headers pass through; `/readyz` answers through it; a
//! session runs over the proxied WebSocket, the instance that holds it is killed (SIGKILL), and
//! the client resumes through nginx on the other one and goes on; the client address the
//! instances count is the one nginx saw, not what a client wrote in `X-Forwarded-For`; and an
//! instance whose store is down is alive (`/healthz`) but not ready (`/readyz` 503). (The
//! soak through nginx with every instance killed in turn is in soak.rs.) And the systemd unit
//! passes only flags `tether serve` has.

mod common;

use std::time::Duration;

use common::dir::TestDir;
use common::nginx::Nginx;
use common::redis::Redis;
use common::serve::{Serve, Served};
use common::{Client, run_works};
use serde_json::json;
use tether_protocol::{ClientFrame, ErrorCode, Hello, PROTOCOL_VERSION};

/// An instance behind nginx: sessions on the shared Redis, nginx (127.0.0.1) trusted for the
/// client's address, one session per client address.
fn instance(redis: &Redis, dir: &TestDir) -> Served {
    Serve::new()
        .args(["--store", &redis.url(), "--lease-ms", "500", "--reconnect-grace-seconds", "1"])
        .args(["--trusted-proxy", "127.0.0.1", "--max-sessions-per-ip", "1"])
        // Not `localhost`: a page on nginx's loopback address is allowed as the server's own origin.
        .args(["--allow-origin", "https://partner.example"])
        .args([std::ffi::OsStr::new("--static"), dir.0.as_os_str()])
        .start()
}

async fn get(addr: &str, path: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    // Without decompression or redirects: the test sees what nginx sent.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let mut request = client.get(format!("http://{addr}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

fn header(response: &reqwest::Response, name: &str) -> String {
    response.headers().get(name).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_nginx_a_session_outlives_the_instance_that_held_it_and_files_keep_their_encoding() {
    let redis = Redis::start("nginx-e2e", &[]);
    let dir = TestDir::new("nginx-e2e");
    std::fs::write(dir.file("index.html"), "<!doctype html><title>app</title>").unwrap();
    let script = "export const where = 'the file as built';\n".repeat(50);
    std::fs::write(dir.file("app-D3kX9a1b.js"), &script).unwrap();
    let gzipped = {
        use std::io::Write;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(script.as_bytes()).unwrap();
        encoder.finish().unwrap()
    };
    std::fs::write(dir.file("app-D3kX9a1b.js.gz"), &gzipped).unwrap();
    let mut instances = [Some(instance(&redis, &dir)), Some(instance(&redis, &dir))];
    let addrs: Vec<String> = instances.iter().flatten().map(|served| served.addr.clone()).collect();
    let nginx = Nginx::start("e2e", &addrs);

    // Plain HTTP goes to HTTPS.
    let redirect = get(&nginx.redirect_addr, "/shop?x=1", &[("host", "shop.test")]).await;
    assert_eq!(redirect.status(), 301);
    assert_eq!(header(&redirect, "location"), "https://shop.test/shop?x=1");
    // The precompressed sibling and the cache headers pass through nginx unchanged.
    let file = get(&nginx.addr, "/app-D3kX9a1b.js", &[("accept-encoding", "gzip")]).await;
    assert_eq!(file.status(), 200);
    assert_eq!(header(&file, "content-encoding"), "gzip");
    assert_eq!(header(&file, "cache-control"), "public, max-age=31536000, immutable");
    assert!(header(&file, "vary").to_ascii_lowercase().contains("accept-encoding"));
    assert_eq!(file.bytes().await.unwrap().as_ref(), gzipped.as_slice());
    // The operator's metrics and console are not on the public site (each instance serves them).
    for path in ["/metrics", "/console", "/console/api/sessions"] {
        assert_eq!(get(&nginx.addr, path, &[]).await.status(), 404, "{path}");
        assert_eq!(get(&addrs[0], path, &[]).await.status(), 200, "{path}");
    }
    // Readiness includes the store.
    let ready = get(&nginx.addr, "/readyz", &[]).await;
    assert_eq!(ready.status(), 200);
    let ready: serde_json::Value = ready.json().await.unwrap();
    assert_eq!(ready["status"], "ready", "{ready}");

    // A session through nginx. The client writes an address of its own into X-Forwarded-For;
    // nginx replaces it with the one it saw (127.0.0.1), which the instances trust.
    // The page's origin is nginx's: allowed as the server's own (nginx passes the Host on).
    let origin = format!("http://{}", nginx.addr);
    let mut client =
        Client::connect_with(&nginx.url(), &[("Origin", origin.as_str()), ("X-Forwarded-For", "198.51.100.9")]).await;
    let welcome = client.hello(None).await;
    run_works(&mut client, 1).await;

    let mut foreign = Client::connect_with(&nginx.url(), &[("Origin", "https://evil.example")]).await;
    assert_eq!(foreign.error().await.code, ErrorCode::Unauthorized);

    // The instance that holds the session is killed; the client resumes through nginx.
    let mut holder = None;
    for (index, served) in instances.iter().enumerate() {
        if served.as_ref().unwrap().health().await["sessions"] == json!(1) {
            holder = Some(index);
        }
    }
    let holder = holder.expect("one instance holds the session");
    let resume = client.resume_info();
    instances[holder].take().unwrap().kill();
    client.kill();
    let mut back = Client::connect(&nginx.url()).await;
    let again = back.hello(Some(resume)).await;
    assert!(again.resumed, "the other instance took the session over from Redis");
    assert_eq!(again.session_id, welcome.session_id);
    run_works(&mut back, 2).await;
    let survivor = instances[1 - holder].as_ref().unwrap();
    assert_eq!(survivor.health().await["sessions"], json!(1), "the session lives on the other instance now");

    // A second client through nginx, on the one instance left, comes from the same address as
    // nginx reports it, whatever address it claims: over the limit of one.
    let mut other = Client::connect_with(&nginx.url(), &[("X-Forwarded-For", "203.0.113.50")]).await;
    let id = other.id();
    other.send(ClientFrame::Hello(Hello { id, protocol_version: PROTOCOL_VERSION, resume: None, client: None })).await;
    assert_eq!(other.error().await.code, ErrorCode::LimitExceeded);

    // Without its store an instance is alive but not ready.
    let mut redis = redis;
    redis.kill();
    let unready = get(&nginx.addr, "/readyz", &[]).await;
    assert_eq!(unready.status(), 503);
    let unready: serde_json::Value = unready.json().await.unwrap();
    assert!(unready["status"].as_str().unwrap().starts_with("store "), "{unready}");
    assert_eq!(get(&nginx.addr, "/healthz", &[]).await.status(), 200);
    // With every instance gone, nginx has nothing to send to: readiness fails (502 from nginx).
    instances[1 - holder].take().unwrap().kill();
    let gone = tokio::time::timeout(Duration::from_secs(10), get(&nginx.addr, "/readyz", &[])).await.unwrap();
    assert_eq!(gone.status(), 502);
}

#[test]
fn the_systemd_unit_passes_only_flags_tether_serve_has() {
    let unit = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/systemd/tether@.service"))
        .expect("deploy/systemd/tether@.service");
    // ExecStart and its continuation lines (ending in a backslash).
    let mut exec = String::new();
    for line in unit.split("ExecStart=").nth(1).expect("an ExecStart line").lines() {
        exec.push_str(line.trim_end_matches('\\'));
        exec.push(' ');
        if !line.ends_with('\\') {
            break;
        }
    }
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_tether")).args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let flags: Vec<&str> = exec.split_whitespace().filter(|word| word.starts_with("--")).collect();
    assert!(flags.len() >= 6, "{exec}");
    for flag in flags {
        assert!(
            help.contains(&format!("{flag} ")),
            "the unit passes {flag}, which `tether serve --help` does not list"
        );
    }
}
