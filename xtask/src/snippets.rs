//! The READMEs' code snippets compile as pasted: every Rust, TypeScript or TOML block in them is
//! preceded by `<!-- file: PATH -->` and is that file, word for word. The files are the examples
//! `cargo xtask test` builds (and drives in Chromium), so a snippet that stops compiling fails the
//! build of its example, and a snippet that drifts from its file fails here. Runs with the native
//! tests (`cargo test -p xtask`).

#[cfg(test)]
mod tests {
    use crate::cmd::repo_root;

    /// The READMEs a newcomer reads.
    const READMES: [&str; 2] = ["README.md", "www/packages/react/README.md"];

    /// Languages whose blocks must be files of the repository (shell and text blocks are not code
    /// to paste into a file).
    const CODE: [&str; 8] = ["rust", "rs", "tsx", "ts", "typescript", "toml", "js", "jsx"];

    /// One fenced block: its language, its text, the `file:` marker before it (if any), its line.
    struct Block {
        lang: String,
        text: String,
        file: Option<String>,
        line: usize,
    }

    fn blocks(markdown: &str) -> Vec<Block> {
        let mut blocks = Vec::new();
        let mut lines = markdown.lines().enumerate();
        let mut marker: Option<String> = None;
        while let Some((number, line)) = lines.next() {
            if let Some(lang) = line.strip_prefix("```") {
                let mut text = String::new();
                for (_, inner) in lines.by_ref() {
                    if inner.starts_with("```") {
                        break;
                    }
                    text.push_str(inner);
                    text.push('\n');
                }
                blocks.push(Block { lang: lang.trim().to_string(), text, file: marker.take(), line: number + 1 });
            } else if let Some(path) = line.trim().strip_prefix("<!-- file: ").and_then(|l| l.strip_suffix(" -->")) {
                marker = Some(path.trim().to_string());
            } else if !line.trim().is_empty() {
                marker = None;
            }
        }
        blocks
    }

    #[test]
    fn every_code_block_of_the_readmes_is_a_file_that_is_built() {
        let mut problems = Vec::new();
        let mut checked = 0;
        for readme in READMES {
            let markdown = std::fs::read_to_string(repo_root().join(readme)).expect("the README reads");
            for block in blocks(&markdown).into_iter().filter(|b| CODE.contains(&b.lang.as_str())) {
                let at = format!("{readme}:{}", block.line);
                let Some(file) = block.file else {
                    problems.push(format!("{at}: a ```{} block without `<!-- file: PATH -->` before it", block.lang));
                    continue;
                };
                match std::fs::read_to_string(repo_root().join(&file)) {
                    Ok(content) if content == block.text => checked += 1,
                    Ok(_) => problems.push(format!("{at}: the block differs from {file} (copy the file into it)")),
                    Err(error) => problems.push(format!("{at}: {file}: {error}")),
                }
            }
        }
        assert!(problems.is_empty(), "README snippets:\n{}", problems.join("\n"));
        assert!(checked >= 5, "only {checked} snippets checked: the walkthroughs lost theirs?");
    }

    #[test]
    fn a_block_is_checked_only_with_its_marker_right_before_it() {
        let markdown =
            "<!-- file: a.rs -->\n\n```rust\nfn a() {}\n```\n<!-- file: b.rs -->\ntext\n```rust\nfn b() {}\n```\n";
        let found = blocks(markdown);
        assert_eq!(found.len(), 2);
        assert_eq!((found[0].file.as_deref(), found[0].text.as_str(), found[0].line), (Some("a.rs"), "fn a() {}\n", 3));
        assert_eq!(found[1].file, None, "text between the marker and the block cancels it");
    }
}
