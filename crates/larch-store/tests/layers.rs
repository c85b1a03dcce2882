//! The store's source layers (`docs/architecture.md`, *larch-store's layers*): each folder of
//! `src/` may import only the folders below it, and no two modules import each other, directly
//! or through others. Read from the source files themselves: every `crate::` path outside
//! comments is an import of the module it names.
//!
//! A *module* here is a file directly in a layer folder (`src/gc/mark.rs`) together with the files
//! of its own sub-folder (`src/gc/mark/*.rs`), which are that module split by concern; the files
//! at the top of `src/` are modules of their own (`repo.rs` with `repo/`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers from the bottom up: a module may import its own layer's modules and those of the
/// layers before it.
const LAYERS: &[&[&str]] = &[
    &["error", "options"],
    &["format"],
    &["io"],
    &["pack"],
    &["commit"],
    &["switch"],
    &["gc"],
    &["check"],
    &["repo"],
    &["recovery"],
    &["lib", "testing"],
];

fn layer_of(top: &str) -> usize {
    LAYERS.iter().position(|layer| layer.contains(&top)).unwrap_or_else(|| {
        panic!("src/{top} is in no layer of this test: add it to LAYERS and to docs/architecture.md")
    })
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// The module a file belongs to: `["gc", "mark"]` for `gc/mark.rs` and `gc/mark/tests.rs`,
/// `["repo"]` for `repo.rs` and `repo/gc.rs`, `["format"]` for `format/mod.rs`.
fn module_of(relative: &Path) -> Vec<String> {
    let parts: Vec<String> =
        relative.iter().map(|part| part.to_string_lossy().trim_end_matches(".rs").to_string()).collect();
    let top = parts[0].clone();
    if top == "repo" || parts.len() == 1 || parts[1] == "mod" {
        return vec![top];
    }
    vec![top, parts[1].clone()]
}

/// The source without comments (line comments, doc comments, block comments) and string
/// literals, so that paths in prose are not read as imports.
fn code_only(source: &str) -> String {
    let bytes = source.as_bytes();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(b"//") {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
        } else if bytes[i..].starts_with(b"/*") {
            while i < bytes.len() && !bytes[i..].starts_with(b"*/") {
                i += 1;
            }
            i += 2;
        } else if bytes[i] == b'"' {
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else {
            out.push(bytes[i] as char);
            i += 1;
        }
    }
    out
}

fn is_ident(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// The first two segments of every path starting with `crate::` (group imports expanded one
/// level: `crate::format::{codec, control}` gives both).
fn crate_paths(code: &str) -> Vec<(String, Option<String>)> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(pos) = code[at..].find("crate::") {
        let start = at + pos;
        at = start + "crate::".len();
        if start > 0 && (is_ident(bytes[start - 1]) || bytes[start - 1] == b':') {
            continue;
        }
        let ident = |mut i: usize| {
            let from = i;
            while i < bytes.len() && is_ident(bytes[i]) {
                i += 1;
            }
            (code[from..i].to_string(), i)
        };
        let group = |mut i: usize| {
            // Items of a `{...}` group at its top level.
            let mut items = Vec::new();
            let mut depth = 0;
            let mut item_start = true;
            while i < bytes.len() {
                match bytes[i] {
                    b'{' => depth += 1,
                    b'}' if depth == 0 => break,
                    b'}' => depth -= 1,
                    b',' if depth == 0 => item_start = true,
                    byte if item_start && is_ident(byte) => {
                        let (name, next) = ident(i);
                        items.push(name);
                        item_start = false;
                        i = next;
                        continue;
                    }
                    _ => {}
                }
                i += 1;
            }
            items
        };
        if bytes.get(at) == Some(&b'{') {
            for first in group(at + 1) {
                found.push((first, None));
            }
            continue;
        }
        let (first, next) = ident(at);
        if code[next..].starts_with("::{") {
            for second in group(next + 3) {
                found.push((first.clone(), Some(second)));
            }
        } else if code[next..].starts_with("::") {
            let (second, _) = ident(next + 2);
            found.push((first, Some(second)));
        } else {
            found.push((first, None));
        }
    }
    found
}

/// The names `lib.rs` re-exports at the crate root, with the module each comes from.
fn root_exports(lib: &str, modules: &BTreeSet<Vec<String>>) -> BTreeMap<String, Vec<String>> {
    let mut exports = BTreeMap::new();
    let code = code_only(lib);
    for statement in code.split(';') {
        let Some(path) = statement.trim().strip_prefix("pub use ") else { continue };
        let segments: Vec<&str> = path.split("::").collect();
        let module = resolve(segments[0], segments.get(1).map(|s| s.to_string()), modules);
        let names = path.rsplit("::").next().unwrap();
        for name in names.trim_matches(|c: char| c == '{' || c == '}' || c.is_whitespace()).split(',') {
            let name = name.trim();
            if !name.is_empty() {
                exports.insert(name.to_string(), module.clone());
            }
        }
    }
    exports
}

fn resolve(first: &str, second: Option<String>, modules: &BTreeSet<Vec<String>>) -> Vec<String> {
    if let Some(second) = second {
        let candidate = vec![first.to_string(), second];
        if modules.contains(&candidate) {
            return candidate;
        }
    }
    vec![first.to_string()]
}

#[test]
fn the_store_imports_only_downwards_and_without_circles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut sources = BTreeMap::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap().to_path_buf();
        sources.insert(relative, std::fs::read_to_string(file).unwrap());
    }
    let modules: BTreeSet<Vec<String>> = sources.keys().map(|file| module_of(file)).collect();
    let exports = root_exports(&sources[Path::new("lib.rs")], &modules);

    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    let mut upwards = Vec::new();
    for (file, source) in &sources {
        let from = module_of(file);
        assert!(!source.contains("#[path"), "src/{}: a #[path] attribute", file.display());
        for (first, second) in crate_paths(&code_only(source)) {
            let to = match exports.get(&first) {
                Some(module) if !modules.iter().any(|m| m[0] == first) => module.clone(),
                _ => resolve(&first, second, &modules),
            };
            if to == from || to[0] == "lib" {
                continue;
            }
            if layer_of(&to[0]) > layer_of(&from[0]) {
                upwards.push(format!(
                    "src/{} imports crate::{} (a higher layer)",
                    file.display(),
                    to.join("::")
                ));
            }
            edges.entry(from.clone()).or_default().insert(to);
        }
    }
    assert!(upwards.is_empty(), "imports running up the layers:\n{}", upwards.join("\n"));

    // No circle: a depth-first search finds no edge back to a module on the current path.
    fn visit(
        module: &Vec<String>,
        edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        path: &mut Vec<Vec<String>>,
        done: &mut BTreeSet<Vec<String>>,
    ) -> Option<Vec<Vec<String>>> {
        if let Some(at) = path.iter().position(|m| m == module) {
            let mut circle = path[at..].to_vec();
            circle.push(module.clone());
            return Some(circle);
        }
        if done.contains(module) {
            return None;
        }
        path.push(module.clone());
        for next in edges.get(module).into_iter().flatten() {
            if let Some(circle) = visit(next, edges, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        done.insert(module.clone());
        None
    }
    let mut done = BTreeSet::new();
    for module in &modules {
        if let Some(circle) = visit(module, &edges, &mut Vec::new(), &mut done) {
            let names: Vec<String> = circle.iter().map(|m| m.join("::")).collect();
            panic!("an import circle: {}", names.join(" -> "));
        }
    }
    // The test reads real imports: the store has some, and the writer's encoder imports the pack.
    let encoder = vec!["commit".to_string(), "writer".to_string()];
    assert!(edges.get(&encoder).is_some_and(|to| to.iter().any(|m| m[0] == "pack")));
}
