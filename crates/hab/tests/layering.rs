//! The library's layers import only downward. Each folder of `src/` is a layer; a file may
//! import (`crate::layer::…`) from its own layer and the layers below it, never from one
//! above. The test prints the layer graph it found:
//!
//! ```text
//! cargo test -p hab --test layering -- --nocapture
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The layers, lowest first (the order of `lib.rs` and `docs/ARCHITECTURE.md`).
const LAYERS: [&str; 8] = [
    "memory",
    "platform",
    "config",
    "levels",
    "labs",
    "mutator",
    "heap",
    "collection",
];

fn rank(layer: &str) -> Option<usize> {
    LAYERS.iter().position(|name| *name == layer)
}

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
}

/// The text without `//` comments (doc links may name any layer).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules a file names as `crate::x`, including inside `use crate::{x, y}`.
fn imported_layers(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                found.insert(name);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            found.insert(name);
        }
    }
    found
}

#[test]
fn layers_import_only_downward() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    let mut violations = Vec::new();
    let mut unplaced = BTreeSet::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let mut parts = relative.components();
        let first = parts
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .to_string();
        if parts.next().is_none() {
            // A file directly in src/: only lib.rs, which re-exports every layer.
            if first != "lib.rs" {
                unplaced.insert(first);
            }
            continue;
        }
        let Some(from) = rank(&first) else {
            unplaced.insert(first);
            continue;
        };
        let code = code_of(&fs::read_to_string(file).unwrap());
        for name in imported_layers(&code) {
            let Some(to) = rank(&name) else { continue };
            if to != from {
                graph.entry(from).or_default().insert(to);
            }
            if to > from {
                violations.push(format!(
                    "{} ({}) imports crate::{name}, a higher layer",
                    relative.display(),
                    LAYERS[from]
                ));
            }
        }
    }
    println!("layers, lowest first, and what each imports:");
    for (index, layer) in LAYERS.iter().enumerate() {
        let below: Vec<&str> = graph
            .get(&index)
            .map(|targets| targets.iter().map(|&t| LAYERS[t]).collect())
            .unwrap_or_default();
        println!("  {index}. {layer:<10} <- {}", below.join(", "));
    }
    assert!(
        unplaced.is_empty(),
        "files or folders of src/ in no layer (add them to a layer folder, or the folder to LAYERS): {unplaced:?}"
    );
    assert!(
        violations.is_empty(),
        "imports against the layering:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_check_sees_imports_in_every_form() {
    let code = code_of(
        "use crate::heap::Heap;\nuse crate::{labs, memory::space};\n// crate::collection\nlet x = crate::levels::middle::carve;",
    );
    let found = imported_layers(&code);
    let expected: BTreeSet<String> = ["heap", "labs", "memory", "levels"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(found, expected);
}
