//! The library's layers import only downward. Each folder of `src/` is a layer; a file may
//! import (`crate::layer::…`) from its own layer and the layers below it, never from one
//! above. The architecture page's layer table names every file of every layer. The test
//! prints the layer graph it found:
//!
//! ```text
//! cargo test -p hab --test layering -- --nocapture
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The layers, lowest first (the order of `docs/ARCHITECTURE.md`'s layer table, which
/// [`the_architecture_page_lists_every_file_of_every_layer`] checks).
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

/// The files a row of the architecture page's layer table names, as paths relative to the
/// layer's folder: `` `a.rs` `` is a file of the layer, `` `sub/` (`b.rs`, `c.rs`) `` files of
/// a subfolder. A layer's own `mod.rs` may be named or not.
fn listed_files(column: &str) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    let mut folder: Option<String> = None;
    let mut depth = 0;
    for (index, piece) in column.split('`').enumerate() {
        if index % 2 == 0 {
            // Between names: parentheses open and close a subfolder's list.
            for c in piece.chars() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        folder = None;
                    }
                    _ => {}
                }
            }
        } else if let Some(sub) = piece.strip_suffix('/') {
            folder = Some(sub.to_string());
        } else {
            match (&folder, depth) {
                (Some(sub), 1) => files.insert(format!("{sub}/{piece}")),
                _ => files.insert(piece.to_string()),
            };
        }
    }
    files.remove("mod.rs");
    files
}

#[test]
fn the_architecture_page_lists_every_file_of_every_layer() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = fs::read_to_string(root.join("../../docs/ARCHITECTURE.md")).unwrap();
    let mut rows = Vec::new();
    for line in page.lines() {
        // `| 0 | `memory` | files | what |`
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() >= 5 && cells[1].parse::<usize>().is_ok() {
            rows.push((cells[2].trim_matches('`').to_string(), cells[3].to_string()));
        }
    }
    let names: Vec<&str> = rows.iter().map(|(layer, _)| layer.as_str()).collect();
    assert_eq!(names, LAYERS, "the table's layers, in order");
    let mut wrong = Vec::new();
    for (layer, column) in &rows {
        let dir = root.join("src").join(layer);
        let mut paths = Vec::new();
        rust_files(&dir, &mut paths);
        let actual: BTreeSet<String> = paths
            .iter()
            .map(|path| {
                path.strip_prefix(&dir)
                    .unwrap()
                    .to_string_lossy()
                    .to_string()
            })
            .filter(|path| path != "mod.rs")
            .collect();
        let listed = listed_files(column);
        if listed != actual {
            wrong.push(format!(
                "{layer}: missing from the page {:?}, gone from the folder {:?}",
                actual.difference(&listed).collect::<Vec<_>>(),
                listed.difference(&actual).collect::<Vec<_>>()
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/ARCHITECTURE.md's layer table and src/ disagree:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_file_list_parser_reads_subfolders() {
    let files = listed_files("`rseq/` (`mod.rs`, `x.rs`), `a.rs`, `mod.rs`");
    let expected: BTreeSet<String> = ["rseq/mod.rs", "rseq/x.rs", "a.rs"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(files, expected);
}

/// The sibling modules each file of `dir` (one folder's files, `mod.rs` its root) names:
/// `super::x` or `use super::{x, …}` from a file, `x::` from `mod.rs`. Tests are left out.
fn sibling_imports(dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = BTreeMap::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "rs") {
            let name = path.file_stem().unwrap().to_string_lossy().to_string();
            let text = fs::read_to_string(&path).unwrap();
            let code = code_of(text.split("#[cfg(test)]\nmod tests").next().unwrap());
            files.insert(name, code);
        }
    }
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    files
        .iter()
        .map(|(name, code)| {
            let mut named = BTreeSet::new();
            for module in &modules {
                if module == name {
                    continue;
                }
                let pattern = if name == "mod" {
                    format!("{module}::")
                } else {
                    format!("super::{module}")
                };
                let in_group = name != "mod"
                    && code.split("use super::{").skip(1).any(|group| {
                        let group = &group[..group.find("};").unwrap_or(group.len())];
                        group
                            .split(|c: char| !is_word(c))
                            .any(|word| word == module)
                    });
                let found = code.match_indices(&pattern).any(|(at, _)| {
                    let before = code[..at].chars().next_back();
                    let after = code[at + pattern.len()..].chars().next();
                    let inside_a_word = before.is_some_and(is_word);
                    let longer_name = name != "mod" && after.is_some_and(is_word);
                    !inside_a_word && !longer_name
                });
                if found || in_group {
                    named.insert(module.clone());
                }
            }
            // A file that names an item of `mod.rs` (`super::Item`) imports the root.
            if name != "mod"
                && code.match_indices("super::").any(|(at, _)| {
                    let word: String = code[at + "super::".len()..]
                        .chars()
                        .take_while(|&c| is_word(c))
                        .collect();
                    !word.is_empty() && !modules.contains(&word)
                })
            {
                named.insert("mod".to_string());
            }
            (name.clone(), named)
        })
        .collect()
}

/// The groups of files that import each other, directly or through others (each sorted).
fn file_circles(imports: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<Vec<String>> {
    let reaches = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&String> = vec![from];
        while let Some(file) = todo.pop() {
            for next in imports.get(file).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next);
                }
            }
        }
        seen
    };
    let closure: BTreeMap<&String, BTreeSet<String>> =
        imports.keys().map(|file| (file, reaches(file))).collect();
    closure
        .iter()
        .filter(|(file, reached)| reached.contains(**file))
        .map(|(file, _)| {
            closure
                .iter()
                .filter(|(other, reached)| {
                    reached.contains(*file) && closure[file].contains(**other)
                })
                .map(|(other, _)| other.to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The report's files (`crates/hab-cli/src/report`) form no circle: the experiment list in
/// `mod.rs`, the shared helpers and the `Experiment` trait below every experiment.
#[test]
fn the_report_has_no_file_circle() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../hab-cli/src/report");
    let imports = sibling_imports(&dir);
    for (file, named) in &imports {
        println!("report/{file}.rs -> {named:?}");
    }
    let circles = file_circles(&imports);
    assert!(
        circles.is_empty(),
        "file circles in the report: {circles:?}"
    );
}

#[test]
fn a_file_circle_is_found() {
    let imports: BTreeMap<String, BTreeSet<String>> = [
        ("mod", &["a", "b", "c"][..]),
        ("a", &["b"][..]),
        ("b", &["c"][..]),
        ("c", &["a"][..]),
        ("d", &["a"][..]),
    ]
    .iter()
    .map(|(file, named)| {
        (
            file.to_string(),
            named.iter().map(|n| n.to_string()).collect(),
        )
    })
    .collect();
    let circles = file_circles(&imports);
    assert_eq!(
        circles,
        BTreeSet::from([vec!["a".to_string(), "b".to_string(), "c".to_string()]])
    );
}
