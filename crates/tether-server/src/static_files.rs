//! Static pages as a CDN would serve them: compressed, cached, revalidated.
//!
//! Everything is tower-http's: [`ServeDir`] sends a file's precompressed sibling (`app.js.br`,
//! `app.js.gz`, as `cargo xtask app` and the demo builds write them) when the browser accepts
//! that encoding, with `Vary: Accept-Encoding`, an `ETag` and `Last-Modified` that answer a
//! revalidation with `304 Not Modified`, and the type from the extension (`application/wasm`,
//! so browsers compile while downloading). A file without a precompressed sibling is compressed
//! as it is sent ([`CompressionLayer`]: brotli or gzip). Unknown paths get `index.html` (an app
//! that routes in the browser).
//!
//! `Cache-Control` is the one decision made here, from the file's name: a content-hashed name
//! (`index-D3kX9a1b.js`, as Vite and Trunk write them) never changes, so it is cached for a
//! year as `immutable`; any other file (`index.html`, `app_bg.wasm`) is `no-cache`: kept, but
//! revalidated on each load, which costs a `304` of a few hundred bytes when nothing changed.

use std::path::Path;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use tower_http::compression::CompressionLayer;
use tower_http::services::{ServeDir, ServeFile};

/// `Cache-Control` of a content-hashed file.
pub(crate) const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// `Cache-Control` of any other file.
pub(crate) const REVALIDATE: &str = "no-cache";

/// The routes serving `dir` (with `index.html` for paths that are not files).
pub(crate) fn router(dir: &Path) -> Router {
    let index = ServeFile::new(dir.join("index.html")).precompressed_br().precompressed_gzip();
    let files = ServeDir::new(dir).precompressed_br().precompressed_gzip().fallback(index);
    Router::new()
        .fallback_service(files)
        .layer(CompressionLayer::new().br(true).gzip(true))
        .layer(axum::middleware::from_fn(cache_control))
}

async fn cache_control(request: Request, next: Next) -> Response {
    let hashed = content_hashed(request.uri().path());
    let mut response = next.run(request).await;
    let html = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/html"));
    // `index.html` served for a path that only looks hashed is still revalidated.
    let value = if hashed && !html { IMMUTABLE } else { REVALIDATE };
    if response.status().is_success() || response.status() == axum::http::StatusCode::NOT_MODIFIED {
        response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static(value));
    }
    response
}

/// Whether the last segment of a file name's stem is a content hash: 8 or more letters and
/// digits (and `_`), with at least one of each, after a `-` or `.` (`index-D3kX9a1b.js`,
/// `app-1a2b3c4d5e6f7a8b_bg.wasm`, `main.5f3a9c1e.css`).
pub(crate) fn content_hashed(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or_default();
    let Some((stem, _extension)) = name.rsplit_once('.') else { return false };
    let stem = stem.strip_suffix("_bg").unwrap_or(stem);
    let Some(at) = stem.rfind(['-', '.']) else { return false };
    let hash = &stem[at + 1..];
    hash.len() >= 8
        && hash.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && hash.chars().any(|c| c.is_ascii_digit())
        && hash.chars().any(|c| c.is_ascii_alphabetic())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_hashed_names_are_told_from_others() {
        for hashed in
            ["/assets/index-D3kX9a1b.js", "/app-1a2b3c4d5e6f7a8b_bg.wasm", "/main.5f3a9c1e.css", "/x/y-abcd1234.svg"]
        {
            assert!(content_hashed(hashed), "{hashed}");
        }
        for plain in [
            "/",
            "/index.html",
            "/storefront_leptos_bg.wasm",
            "/tether-runtime.js",
            "/assets/logo-dark.svg",
            "/12345678.js",
            "/cart",
        ] {
            assert!(!content_hashed(plain), "{plain}");
        }
    }
}
