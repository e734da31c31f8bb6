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

/// A file's module path in its crate: `src/a/b.rs` and `src/a/b/mod.rs` are `a::b`,
/// `src/lib.rs` is the root (empty).
fn module_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .components()
        .map(|part| part.as_os_str().to_string_lossy().to_string())
        .collect();
    let file = parts.pop().unwrap();
    let stem = file.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

/// The paths a `use` tree names, its groups expanded: `a::{b, c::{d, self}}` gives `a::b`,
/// `a::c::d` and `a::c`. Renames and globs end a path.
fn use_paths(tree: &str) -> Vec<String> {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or("");
        let path = path.split("as").next().unwrap_or("");
        return vec![path
            .trim_end_matches("::*")
            .trim_end_matches("::self")
            .to_string()];
    };
    let prefix = tree[..open].trim_end_matches("::");
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let (mut depth, mut start, mut items) = (0, 0, Vec::new());
    for (at, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inner[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    items
        .into_iter()
        .filter(|item| !item.is_empty())
        .flat_map(use_paths)
        .map(|path| match path.as_str() {
            "self" | "*" => prefix.to_string(),
            _ => format!("{prefix}::{path}"),
        })
        .collect()
}

/// Which files each file of a crate's `src` imports (`use` trees and paths in code through
/// `crate::`, `super::`, `self::` or a child module's name), as module paths joined by `::`
/// (the root is `lib`). A `mod x;` declaration is not an import; tests are left out.
fn file_imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut paths = Vec::new();
    rust_files(src, &mut paths);
    let mut codes = BTreeMap::new();
    // Modules whose file is a folder's `mod.rs` (or `lib.rs`): a `#[path]` there names a file
    // of that folder; elsewhere, of the folder the declaring file sits in.
    let mut folder_roots = BTreeSet::new();
    for path in paths {
        let relative = path.strip_prefix(src).unwrap();
        if relative.file_name().is_some_and(|name| name == "tests.rs") {
            continue;
        }
        if relative
            .file_name()
            .is_some_and(|name| name == "mod.rs" || name == "lib.rs")
        {
            folder_roots.insert(module_of(relative));
        }
        let text = fs::read_to_string(&path).unwrap();
        let code = code_of(text.split("#[cfg(test)]\nmod tests").next().unwrap());
        codes.insert(module_of(relative), code);
    }
    let name = |module: &[String]| match module {
        [] => "lib".to_string(),
        _ => module.join("::"),
    };
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    // `#[path = "file.rs"] mod name;`: the module `name` is the file `file.rs` (one of them,
    // where `cfg`s pick one per platform: each counts).
    let mut aliases: BTreeMap<Vec<String>, Vec<Vec<String>>> = BTreeMap::new();
    for (module, code) in &codes {
        for rest in code.split("#[path = \"").skip(1) {
            let Some((file, rest)) = rest.split_once(".rs\"]") else {
                continue;
            };
            let declared = rest.trim_start().strip_prefix("mod ");
            if let Some(name) = declared.and_then(|rest| rest.split(';').next()) {
                let alias = [module.clone(), vec![name.trim().to_string()]].concat();
                let mut folder = module.clone();
                if !folder_roots.contains(module) {
                    folder.pop();
                }
                let file = [folder, vec![file.to_string()]].concat();
                aliases.entry(alias).or_default().push(file);
            }
        }
    }
    let mut imports = BTreeMap::new();
    for (module, code) in &codes {
        let mut named: Vec<Vec<String>> = Vec::new();
        let resolve = |path: &str| -> Vec<Vec<String>> {
            let mut segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
            let Some(first) = segments.first().copied() else {
                return Vec::new();
            };
            let at: Vec<String> = match first {
                "crate" => {
                    segments.remove(0);
                    Vec::new()
                }
                "super" | "self" => {
                    let mut at = module.clone();
                    while segments.first() == Some(&"super") || segments.first() == Some(&"self") {
                        if segments.remove(0) == "super" {
                            at.pop();
                        }
                    }
                    at
                }
                first => {
                    let mut child = module.clone();
                    child.push(first.to_string());
                    if !codes.contains_key(&child) && !aliases.contains_key(&child) {
                        return Vec::new();
                    }
                    module.clone()
                }
            };
            // The longest prefix that is a file, through every file an alias may be.
            let mut found = Vec::new();
            let mut paths = vec![at];
            let mut deepest = paths.clone();
            for segment in segments {
                let mut next = Vec::new();
                for path in &paths {
                    let mut step = path.clone();
                    step.push(segment.to_string());
                    match aliases.get(&step) {
                        Some(files) => next.extend(files.iter().cloned()),
                        None if codes.contains_key(&step) => next.push(step),
                        None => {}
                    }
                }
                if next.is_empty() {
                    break;
                }
                deepest = next.clone();
                paths = next;
            }
            found.extend(deepest);
            found
        };
        // `use` statements, their trees expanded.
        for statement in code.split(';') {
            let statement = statement.trim();
            let tree = ["use ", "pub use ", "pub(crate) use ", "pub(super) use "]
                .iter()
                .find_map(|prefix| statement.rsplit_once(prefix).map(|(_, tree)| tree));
            if let Some(tree) = tree {
                named.extend(use_paths(tree).iter().flat_map(|path| resolve(path)));
            }
        }
        // Paths in code.
        for start in ["crate::", "super::", "self::"] {
            for (at, _) in code.match_indices(start) {
                if code[..at].chars().next_back().is_some_and(is_word) {
                    continue;
                }
                let path: String = code[at..]
                    .chars()
                    .take_while(|&c| is_word(c) || c == ':')
                    .collect();
                named.extend(resolve(&path));
            }
        }
        // A child module's items, named from its parent by the child's name or the name a
        // `#[path]` gives it.
        for child in codes.keys() {
            if child.len() == module.len() + 1 && child.starts_with(module) {
                let file = child.last().unwrap();
                let mut names = vec![file.clone()];
                names.extend(
                    aliases
                        .iter()
                        .filter(|(alias, targets)| {
                            targets.contains(child) && alias.len() == child.len()
                        })
                        .map(|(alias, _)| alias.last().unwrap().clone()),
                );
                let used = names.iter().any(|name| {
                    let pattern = format!("{name}::");
                    code.match_indices(&pattern).any(|(at, _)| {
                        let before = code[..at].chars().next_back();
                        !before.is_some_and(|c| is_word(c) || c == ':')
                    })
                });
                if used {
                    named.push(child.clone());
                }
            }
        }
        let targets: BTreeSet<String> = named
            .iter()
            .filter(|target| *target != module)
            .map(|target| name(target))
            .collect();
        imports.insert(name(module), targets);
    }
    imports
}

/// No two files of the library (`crates/hab/src`) or of the example VM
/// (`crates/hab-vm/src`) import each other, directly or through others: each crate's files
/// form a tree a newcomer reads bottom up. `lib.rs`, which re-exports, is left out.
#[test]
fn the_crates_have_no_file_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for crate_dir in ["src", "../hab-vm/src"] {
        let mut imports = file_imports(&root.join(crate_dir));
        imports.remove("lib");
        for targets in imports.values_mut() {
            targets.remove("lib");
        }
        for (file, named) in &imports {
            println!("{crate_dir}: {file} -> {named:?}");
        }
        for circle in file_circles(&imports) {
            found.push(format!("{crate_dir}: {}", circle.join(" <-> ")));
        }
    }
    assert!(found.is_empty(), "file circles:\n{}", found.join("\n"));
}

#[test]
fn the_file_graph_reads_every_import_form() {
    let paths = use_paths("crate::levels::{chunk::{Chunk, self}, middle as m, refill::*}");
    assert_eq!(
        paths,
        [
            "crate::levels::chunk::Chunk",
            "crate::levels::chunk",
            "crate::levels::middle",
            "crate::levels::refill"
        ]
    );
}

/// The most lines a file of the library may have outside its tests: a file a newcomer reads
/// in one sitting.
const MAX_FILE_LINES: usize = 650;

/// The lines of `text` before its test module (`#[cfg(test)] mod tests`), if any.
fn non_test_lines(text: &str) -> usize {
    text.split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap_or("")
        .lines()
        .count()
}

/// No file of the library is longer than [`MAX_FILE_LINES`] outside its tests (a test-only
/// file, `tests.rs`, aside). Prints the longest.
#[test]
fn no_library_file_is_too_long() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut lengths: Vec<(usize, String)> = files
        .iter()
        .filter(|path| path.file_name().is_some_and(|name| name != "tests.rs"))
        .map(|path| {
            let lines = non_test_lines(&fs::read_to_string(path).unwrap());
            let name = path.strip_prefix(&src).unwrap().display().to_string();
            (lines, name)
        })
        .collect();
    lengths.sort_unstable_by(|a, b| b.cmp(a));
    println!("the longest files, in lines outside their tests:");
    for (lines, name) in lengths.iter().take(8) {
        println!("  {lines:>4} {name}");
    }
    let long: Vec<_> = lengths
        .iter()
        .filter(|(lines, _)| *lines > MAX_FILE_LINES)
        .collect();
    assert!(
        long.is_empty(),
        "files longer than {MAX_FILE_LINES} lines outside their tests: {long:?}"
    );
}

#[test]
fn test_modules_do_not_count_towards_a_files_length() {
    let text = "fn a() {}\nfn b() {}\n#[cfg(test)]\nmod tests {\n    fn c() {}\n}\n";
    assert_eq!(non_test_lines(text), 2);
    assert_eq!(non_test_lines("fn a() {}\n"), 1);
}
