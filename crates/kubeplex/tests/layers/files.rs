//! No circle between files: the crate's modules are read from `src/lib.rs` down (`mod x;` to `x.rs` or
//! `x/mod.rs`), and each file's paths (`use` trees, types, expressions) that start with `crate`, `super`,
//! `self` or one of its own submodules lead to the file that defines what they name, through the
//! re-exports of folders' faces. Among the files that serve the library (test modules and `#[cfg(test)]`
//! stand-ins left out) no file reaches itself. The crate root is left out too: it is the public face,
//! re-exporting from every folder.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use syn::visit::Visit;

/// One module kept in its own file.
struct Module {
    /// Its submodules kept in files of their own, by name.
    children: BTreeSet<String>,
    /// The items it defines, by name.
    defines: BTreeSet<String>,
    /// What its `use` items bring in, by the name they give it: the path as written.
    uses: BTreeMap<String, Vec<String>>,
    source: syn::File,
}

/// The name an item defines, if it defines one.
fn defined_name(item: &syn::Item) -> Option<String> {
    let ident = match item {
        syn::Item::Const(i) => &i.ident,
        syn::Item::Enum(i) => &i.ident,
        syn::Item::Fn(i) => &i.sig.ident,
        syn::Item::Mod(i) => &i.ident,
        syn::Item::Static(i) => &i.ident,
        syn::Item::Struct(i) => &i.ident,
        syn::Item::Trait(i) => &i.ident,
        syn::Item::Type(i) => &i.ident,
        syn::Item::Union(i) => &i.ident,
        syn::Item::Macro(i) => i.ident.as_ref()?,
        _ => return None,
    };
    Some(ident.to_string())
}

/// Whether `attrs` hold `#[cfg(test)]`.
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Path>()
                .is_ok_and(|p| p.is_ident("test"))
    })
}

/// Reads the module in `file` at `path` and every module below it in a file of its own, into `modules`;
/// `#[cfg(test)]` ones are left out with all they hold.
fn read_modules(file: &Path, path: Vec<String>, modules: &mut BTreeMap<Vec<String>, Module>) {
    let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let source = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    // `x.rs` and `x/mod.rs` keep their submodules in `x/`; `lib.rs` beside itself.
    let stem = file
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    let dir = match stem {
        "lib" | "mod" => file.parent().unwrap().to_path_buf(),
        stem => file.parent().unwrap().join(stem),
    };
    let mut children = BTreeSet::new();
    let defines = source.items.iter().filter_map(defined_name).collect();
    let mut paths = Paths::default();
    for item in &source.items {
        if let syn::Item::Use(item) = item {
            paths.use_tree(&mut Vec::new(), &item.tree);
        }
    }
    let uses = (paths.0.into_iter())
        .filter_map(|(path, name)| Some((name?, path)))
        .collect();
    for item in &source.items {
        let syn::Item::Mod(module) = item else {
            continue;
        };
        if module.content.is_some() || is_test_only(&module.attrs) {
            continue;
        }
        let name = module.ident.to_string();
        let flat = dir.join(format!("{name}.rs"));
        let child = if flat.is_file() {
            flat
        } else {
            dir.join(&name).join("mod.rs")
        };
        let mut child_path = path.clone();
        child_path.push(name.clone());
        read_modules(&child, child_path, modules);
        children.insert(name);
    }
    let module = Module {
        children,
        defines,
        uses,
        source,
    };
    modules.insert(path, module);
}

/// Every path a file names, as written: `use` trees spelled out, and each path of a type, an
/// expression, a pattern or a macro. Inline `#[cfg(test)]` modules are skipped.
#[derive(Default)]
struct Paths(Vec<(Vec<String>, Option<String>)>);

impl Paths {
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => self.push_with(prefix, &name.ident, &name.ident),
            syn::UseTree::Rename(rename) => self.push_with(prefix, &rename.ident, &rename.rename),
            syn::UseTree::Glob(_) => self.0.push((prefix.clone(), None)),
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }

    fn push_with(&mut self, prefix: &[String], last: &syn::Ident, named: &syn::Ident) {
        let mut path = prefix.to_vec();
        if last != "self" {
            path.push(last.to_string());
        }
        self.0.push((path, Some(named.to_string())));
    }
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_item_mod(&mut self, module: &'ast syn::ItemMod) {
        if !is_test_only(&module.attrs) {
            syn::visit::visit_item_mod(self, module);
        }
    }

    // `pub(crate)`, `pub(super)`: a visibility names a module without using it.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments = path.segments.iter().map(|s| s.ident.to_string());
        self.0.push((segments.collect(), None));
        syn::visit::visit_path(self, path);
    }
}

/// `path`, named in the module at `from`, as a path from the crate root; `None` for one that starts
/// elsewhere (an external crate, a name brought in by `use`, a local item).
fn absolute(
    path: &[String],
    from: &[String],
    modules: &BTreeMap<Vec<String>, Module>,
) -> Option<Vec<String>> {
    let (first, rest) = path.split_first()?;
    let mut base: Vec<String> = match first.as_str() {
        "crate" => Vec::new(),
        "self" => from.to_vec(),
        "super" => from[..from.len().checked_sub(1)?].to_vec(),
        child if modules[from].children.contains(child) => {
            let mut base = from.to_vec();
            base.push(child.to_owned());
            base
        }
        _ => return None,
    };
    let mut rest = rest;
    while let Some((segment, after)) = rest.split_first() {
        if segment != "super" {
            break;
        }
        base.pop()?;
        rest = after;
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The module whose file defines what the absolute `path` names: its modules followed from the root, and
/// a name a module only brings in with `use` followed to where that `use` leads.
fn defining(
    path: &[String],
    modules: &BTreeMap<Vec<String>, Module>,
    depth: usize,
) -> Option<Vec<String>> {
    let mut at: Vec<String> = Vec::new();
    for (i, segment) in path.iter().enumerate() {
        let module = &modules[&at];
        if module.children.contains(segment) {
            at.push(segment.clone());
        } else if module.defines.contains(segment) || depth > 16 {
            return Some(at);
        } else if let Some(used) = module.uses.get(segment) {
            let mut target = absolute(used, &at, modules)?;
            target.extend(path[i + 1..].iter().cloned());
            return defining(&target, modules, depth + 1);
        } else {
            return Some(at);
        }
    }
    Some(at)
}

/// Each file's imports of other files, by module path; the crate root's left out.
fn imports(src: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut modules = BTreeMap::new();
    read_modules(&src.join("lib.rs"), Vec::new(), &mut modules);
    let mut graph = BTreeMap::new();
    for (from, module) in &modules {
        if from.is_empty() {
            continue;
        }
        let mut paths = Paths::default();
        paths.visit_file(&module.source);
        let targets = (paths.0.iter())
            .filter_map(|(p, _)| absolute(p, from, &modules))
            .filter_map(|p| defining(&p, &modules, 0))
            .filter(|to| to != from && !to.is_empty())
            .collect();
        graph.insert(from.clone(), targets);
    }
    graph
}

/// The circles of `graph`: each set of two or more modules that reach one another (Tarjan's strongly
/// connected components).
fn circles(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    struct State<'a> {
        graph: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, (usize, usize)>,
        stack: Vec<&'a Vec<String>>,
        on_stack: BTreeSet<&'a Vec<String>>,
        found: Vec<Vec<Vec<String>>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a Vec<String>) {
        let n = state.index.len();
        state.index.insert(node, (n, n));
        state.stack.push(node);
        state.on_stack.insert(node);
        for next in state.graph.get(node).into_iter().flatten() {
            if !state.index.contains_key(next) {
                visit(state, next);
                let low = state.index[next].1.min(state.index[node].1);
                state.index.get_mut(node).unwrap().1 = low;
            } else if state.on_stack.contains(next) {
                let low = state.index[next].0.min(state.index[node].1);
                state.index.get_mut(node).unwrap().1 = low;
            }
        }
        if state.index[node].0 == state.index[node].1 {
            let mut component = Vec::new();
            while let Some(top) = state.stack.pop() {
                state.on_stack.remove(top);
                component.push(top.clone());
                if top == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                state.found.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !state.index.contains_key(node) {
            visit(&mut state, node);
        }
    }
    state.found
}

fn named(circles: &[Vec<Vec<String>>]) -> Vec<String> {
    (circles.iter())
        .map(|c| {
            c.iter()
                .map(|m| m.join("::"))
                .collect::<Vec<_>>()
                .join(" <-> ")
        })
        .collect()
}

#[test]
fn no_file_imports_one_that_imports_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = imports(&src);
    assert!(graph.len() > 100, "only {} files read", graph.len());
    let found = named(&circles(&graph));
    assert!(
        found.is_empty(),
        "circles of imports:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_circle_is_found() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    };
    write("lib.rs", "mod engine;\nmod core;\n");
    write("core.rs", "pub struct Error;\n");
    write(
        "engine/mod.rs",
        "mod engine;\nmod sources;\n#[cfg(test)]\nmod test_engine;\n",
    );
    // `engine` and `sources` import each other; the test double and `core` are no part of a circle.
    write(
        "engine/engine.rs",
        "use super::sources::TermKeys;\nuse crate::core::Error;\npub struct Engine(TermKeys);\n",
    );
    write(
        "engine/sources.rs",
        "pub struct TermKeys;\nimpl crate::engine::engine::Engine { fn f() {} }\n",
    );
    write("engine/test_engine.rs", "use super::engine::Engine;\n");
    let found = named(&circles(&imports(dir.path())));
    assert_eq!(found, ["engine::engine <-> engine::sources"]);
}
