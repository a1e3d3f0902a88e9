//! The built-in model's contract is where a newcomer looks for it: `tether serve --help` prints
//! it, and the README quotes it word for word.

use std::process::Command;

use tether_scripted::SCRIPTED_CONTRACT;

#[test]
fn serve_help_prints_the_built_in_models_contract() {
    let output = Command::new(env!("CARGO_BIN_EXE_tether")).args(["serve", "--help"]).output().expect("tether runs");
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).expect("UTF-8 help");
    assert!(help.contains(SCRIPTED_CONTRACT), "`tether serve --help` lacks the contract:\n{help}");
    assert!(help.contains("--model <MODEL>"), "{help}");
}

#[test]
fn the_readme_quotes_the_contract_word_for_word() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).expect("README.md");
    let block = format!("```text\n{SCRIPTED_CONTRACT}```");
    assert!(readme.contains(&block), "README.md must hold the contract in a ```text block:\n{block}");
}
