//! The runtime's layering: a subsystem folder of `src/` imports only from folders on a lower
//! layer, never from one above it or beside it on its own layer. The order is written here once and
//! mirrored by the table in `docs/architecture.md`.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Lowest layer first; the folders (or root files) on one line form one layer.
const LAYERS: &[&[&str]] = &[
    // The stand-in API servers (`#[cfg(test)]`): importing nothing of the crate, any layer's tests use them.
    &["core", "testing"],
    &["metrics"],
    &["client", "executor"],
    &["readiness"],
    &["watch"],
    &["ha", "members", "plan"],
    &["runtime"],
    &["controller", "webhook"],
    &["engine"],
    &["manager"],
];

/// Modules outside the layers: the crate root, macro support and the optional span export (which imports
/// nothing of the crate).
const EXEMPT: &[&str] = &["lib", "__private", "otlp"];

/// The macros exported at the crate root (`#[macro_export]`), which can be named nowhere else.
const ROOT_MACROS: &[&str] = &["contexts"];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// The top-level module a file under `src/` belongs to: its first folder, or its own name at the root.
fn top_module(relative: &Path) -> String {
    let first = relative.components().next().expect("a path under src/");
    let first = first.as_os_str().to_string_lossy();
    first.strip_suffix(".rs").unwrap_or(&first).to_owned()
}

/// Source without comments (doc comments included: a link is not an import).
fn strip_comments(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |end| &after[end..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |end| &after[end + 2..]);
        } else {
            let ch = rest.chars().next().expect("not empty");
            out.push(ch);
            rest = &rest[ch.len_utf8()..];
        }
    }
    out
}

fn ident_at(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The top-level modules a source names through `crate::`: `crate::a::..` and each first segment of a
/// `crate::{a::.., b, ..}` group.
fn crate_imports(source: &str) -> BTreeSet<String> {
    let text = strip_comments(source);
    let mut found = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        let preceded = text[..at].chars().next_back();
        if preceded.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let after = &text[at + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            let mut depth = 0usize;
            let mut at_item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => at_item_start = true,
                    c if c.is_whitespace() => {}
                    _ if at_item_start => {
                        at_item_start = false;
                        found.insert(ident_at(&group[i..]).to_owned());
                    }
                    _ => {}
                }
            }
        } else {
            found.insert(ident_at(after).to_owned());
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every import of a folder above or beside the importing one, as `file: imports module (layer)`.
fn violations(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut problems = Vec::new();
    for file in files {
        let relative = file.strip_prefix(src).expect("under src/");
        let module = top_module(relative);
        if EXEMPT.contains(&module.as_str()) {
            continue;
        }
        let Some(own) = layer_of(&module) else {
            problems.push(format!(
                "{}: module `{module}` is in no layer; add it to LAYERS (and docs/architecture.md)",
                relative.display()
            ));
            continue;
        };
        let source = fs::read_to_string(&file).expect("a readable source file");
        for imported in crate_imports(&source) {
            if imported == module || EXEMPT.contains(&imported.as_str()) {
                continue;
            }
            match layer_of(&imported) {
                Some(layer) if layer < own => {}
                Some(layer) => problems.push(format!(
                    "{}: imports `crate::{imported}` (layer {layer}) from `{module}` (layer {own}): {}",
                    relative.display(),
                    if layer == own { "a folder beside it" } else { "a folder above it" },
                )),
                // The macros `#[macro_export]` puts at the root have no other path.
                None if ROOT_MACROS.contains(&imported.as_str()) => {}
                // A name lib.rs re-exports for users: inside the crate it hides which folder it comes from.
                None => problems.push(format!(
                    "{}: imports `crate::{imported}` through the crate root; import it from the folder that \
                     defines it",
                    relative.display(),
                )),
            }
        }
    }
    problems
}

#[test]
fn no_folder_imports_one_above_or_beside_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let problems = violations(&src);
    assert!(
        problems.is_empty(),
        "layering broken:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_layered_module_exists() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for module in LAYERS.iter().flat_map(|layer| layer.iter()) {
        let exists = src.join(module).is_dir() || src.join(format!("{module}.rs")).is_file();
        assert!(exists, "LAYERS names `{module}`, which is not in src/");
    }
}

#[test]
fn an_upward_import_is_found() {
    let source = "use crate::core::Error;\n// crate::manager in a comment is no import\nuse crate::{metrics::Metrics, engine::{Engine, Request}};\nfn f() { crate::manager::x(); }\n";
    let found: Vec<_> = crate_imports(source).into_iter().collect();
    assert_eq!(found, ["core", "engine", "manager", "metrics"]);

    let dir = tempfile::tempdir().expect("a temporary directory");
    fs::create_dir(dir.path().join("watch")).expect("a folder");
    fs::write(
        dir.path().join("watch/mod.rs"),
        "use crate::engine::Engine;\nuse crate::core::Error;\n",
    )
    .expect("a file");
    fs::write(
        dir.path().join("executor.rs"),
        "use crate::client::Fence;\n",
    )
    .expect("a file");
    // A name the root re-exports, alone and in a group; a root macro is no import.
    fs::write(
        dir.path().join("metrics.rs"),
        "use crate::Error;\nuse crate::{core::Action, Manager};\ncrate::contexts! {}\n",
    )
    .expect("a file");
    let problems = violations(dir.path());
    assert_eq!(problems.len(), 4, "{problems:#?}");
    assert!(problems[0].starts_with("executor.rs: imports `crate::client` (layer 2) from `executor` (layer 2): a folder beside it"), "{}", problems[0]);
    assert!(
        problems[1].starts_with("metrics.rs: imports `crate::Error` through the crate root"),
        "{}",
        problems[1]
    );
    assert!(
        problems[2].starts_with("metrics.rs: imports `crate::Manager` through the crate root"),
        "{}",
        problems[2]
    );
    assert!(problems[3].starts_with("watch/mod.rs: imports `crate::engine` (layer 8) from `watch` (layer 4): a folder above it"), "{}", problems[3]);
}
