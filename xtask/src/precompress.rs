//! Precompressed siblings of a built app's files (`app.js.br`, `app.js.gz`), which
//! `tether serve --static` sends to browsers that accept them, so nothing is compressed per
//! request and each file is compressed as hard as the formats allow, once.

use std::fs;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

/// The extensions worth compressing (text and wasm; images and fonts are compressed already).
const COMPRESSIBLE: [&str; 10] = ["html", "js", "mjs", "css", "wasm", "json", "svg", "txt", "map", "xml"];

/// Below this a compressed copy saves too little to be worth a file.
const MIN_BYTES: u64 = 1024;

/// What [`precompress`] wrote: files compressed, and their bytes before and as brotli.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Precompressed {
    pub files: usize,
    pub bytes: u64,
    pub brotli_bytes: u64,
}

/// Writes `<file>.br` (brotli, quality 11) and `<file>.gz` (gzip, level 9) beside each
/// compressible file of `dir` and its folders, each only if smaller than the file; a sibling
/// left from an earlier build of a file is replaced or, when no longer smaller, removed.
pub(crate) fn precompress(dir: &Path) -> Result<Precompressed> {
    let mut done = Precompressed::default();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in fs::read_dir(&folder).with_context(|| format!("reading {}", folder.display()))? {
            let entry = entry?;
            let path = entry.path();
            let kind = entry.file_type()?;
            if kind.is_dir() {
                folders.push(path);
                continue;
            }
            let compressible = path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| COMPRESSIBLE.contains(&e.to_ascii_lowercase().as_str()));
            if !kind.is_file() || !compressible || entry.metadata()?.len() < MIN_BYTES {
                continue;
            }
            let bytes = fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            let brotli = brotli_bytes(&bytes)?;
            let gzip = gzip_bytes(&bytes)?;
            done.files += 1;
            done.bytes += bytes.len() as u64;
            done.brotli_bytes += brotli.len().min(bytes.len()) as u64;
            for (suffix, compressed) in [("br", brotli), ("gz", gzip)] {
                let mut sibling = path.clone().into_os_string();
                sibling.push(".");
                sibling.push(suffix);
                if compressed.len() < bytes.len() {
                    fs::write(&sibling, compressed).with_context(|| format!("writing {sibling:?}"))?;
                } else if Path::new(&sibling).exists() {
                    fs::remove_file(&sibling)?;
                }
            }
        }
    }
    Ok(done)
}

fn brotli_bytes(bytes: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    {
        let mut writer = brotli::CompressorWriter::new(&mut out, 64 * 1024, 11, 22);
        writer.write_all(bytes)?;
    }
    Ok(out)
}

fn gzip_bytes(bytes: &[u8]) -> Result<Vec<u8>> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes)?;
    Ok(encoder.finish()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn siblings_decode_to_the_file_and_only_where_they_save_bytes() {
        let dir = std::env::temp_dir().join(format!("xtask-precompress-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("assets")).unwrap();
        let script = "export const greeting = 'hello';\n".repeat(200);
        fs::write(dir.join("assets/index-D3kX9a1b.js"), &script).unwrap();
        fs::write(dir.join("small.css"), "body{}").unwrap();
        fs::write(dir.join("photo.png"), vec![7u8; 4096]).unwrap();
        // Random-looking bytes do not compress: no sibling, and an old one goes.
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                // xorshift64: bytes no compressor finds a pattern in.
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 32) as u8
            })
            .collect();
        fs::write(dir.join("noise.wasm"), &noise).unwrap();
        fs::write(dir.join("noise.wasm.br"), b"stale").unwrap();

        let done = precompress(&dir).unwrap();
        assert_eq!(done.files, 2, "the script and the noise: {done:?}");

        let mut unbrotli = String::new();
        brotli::Decompressor::new(fs::File::open(dir.join("assets/index-D3kX9a1b.js.br")).unwrap(), 4096)
            .read_to_string(&mut unbrotli)
            .unwrap();
        assert_eq!(unbrotli, script);
        let mut ungzip = String::new();
        flate2::read::GzDecoder::new(fs::File::open(dir.join("assets/index-D3kX9a1b.js.gz")).unwrap())
            .read_to_string(&mut ungzip)
            .unwrap();
        assert_eq!(ungzip, script);
        for absent in ["small.css.br", "photo.png.br", "photo.png.gz", "noise.wasm.br", "noise.wasm.gz"] {
            assert!(!dir.join(absent).exists(), "{absent}");
        }
        fs::remove_dir_all(&dir).unwrap();
    }
}
