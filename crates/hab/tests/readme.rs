//! README.md's examples are programs of this repository, word for word: its Rust block is
//! `examples/quickstart.rs` (built by `cargo test`, run by CI) and its C block
//! `crates/hab-capi/examples/c/quickstart.c` (built and run by `hab-capi`'s C tests), so that
//! a newcomer who copies them gets programs that compile and run.

use std::fs;
use std::path::Path;

/// The first fenced block of `language` in `text`, without its fences.
fn first_block(text: &str, language: &str) -> Option<String> {
    let fence = format!("```{language}");
    let mut lines = text.lines().skip_while(|line| line.trim_end() != fence);
    lines.next()?;
    let block: Vec<&str> = lines.take_while(|line| !line.starts_with("```")).collect();
    Some(block.join("\n") + "\n")
}

fn read(relative: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    fs::read_to_string(root.join(relative)).unwrap_or_else(|error| panic!("{relative}: {error}"))
}

#[test]
fn the_readmes_rust_example_is_examples_quickstart() {
    let readme = read("README.md");
    let block = first_block(&readme, "rust").expect("README.md has a ```rust block");
    assert_eq!(
        block,
        read("crates/hab/examples/quickstart.rs"),
        "README.md's Rust example and crates/hab/examples/quickstart.rs differ"
    );
}

#[test]
fn the_readmes_c_example_is_the_c_quickstart() {
    let readme = read("README.md");
    let block = first_block(&readme, "c").expect("README.md has a ```c block");
    assert_eq!(
        block,
        read("crates/hab-capi/examples/c/quickstart.c"),
        "README.md's C example and crates/hab-capi/examples/c/quickstart.c differ"
    );
}

#[test]
fn first_block_reads_the_block_and_nothing_else() {
    let text = "a\n```sh\nx\n```\n```rust\nfn f() {}\n\nlet y = 1;\n```\n```rust\nno\n```\n";
    assert_eq!(
        first_block(text, "rust").as_deref(),
        Some("fn f() {}\n\nlet y = 1;\n")
    );
    assert_eq!(first_block(text, "c"), None);
}
