//! Expansion snapshots: every `tests/expand/<case>.rs` holds one `#[controller(...)]` struct; its expansion,
//! pretty-printed, must equal the committed `tests/expand/<case>.expanded.rs`, so that any change to the
//! generated code shows up in review. `KUBEPLEX_BLESS=1 cargo test -p kubeplex-macros` rewrites them.

use std::path::{Path, PathBuf};

use quote::ToTokens;

fn cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/expand");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.ends_with(".rs") && !name.ends_with(".expanded.rs")
        })
        .collect();
    cases.sort();
    cases
}

/// Expands the `#[controller]` item of a source file and pretty-prints the result.
fn expand_file(source: &str) -> String {
    let file: syn::File = syn::parse_str(source).expect("the case parses");
    let mut out = Vec::new();
    for item in file.items {
        let syn::Item::Struct(mut s) = item else {
            continue;
        };
        let Some(pos) = s.attrs.iter().position(|a| a.path().is_ident("controller")) else {
            continue;
        };
        let attr = s.attrs.remove(pos);
        let args = match attr.meta {
            syn::Meta::List(list) => list.tokens,
            _ => proc_macro2::TokenStream::new(),
        };
        let tokens = crate::attribute::controller_impl(args, s.to_token_stream());
        let expanded: syn::File = syn::parse2(tokens).expect("the expansion parses as a file");
        out.push(prettyplease::unparse(&expanded));
    }
    assert!(!out.is_empty(), "no #[controller] struct in the case");
    out.join("\n")
}

#[test]
fn expansions_match_snapshots() {
    let bless = std::env::var_os("KUBEPLEX_BLESS").is_some_and(|v| v == "1");
    // CI checks the snapshots; one that rewrote them would pass whatever the expansion became.
    let ci = std::env::var_os("CI").is_some_and(|v| v == "true");
    assert!(!(bless && ci), "KUBEPLEX_BLESS=1 is refused under CI=true");
    let cases = cases();
    assert!(cases.len() >= 5, "expansion cases are missing");
    let mut mismatched = Vec::new();
    for case in &cases {
        let source = std::fs::read_to_string(case).expect("reading a case");
        let actual = expand_file(&source);
        let snapshot = case.with_extension("expanded.rs");
        if bless {
            std::fs::write(&snapshot, &actual).expect("writing a snapshot");
            continue;
        }
        let expected = std::fs::read_to_string(&snapshot).unwrap_or_default();
        if expected != actual {
            eprintln!(
                "=== {} differs from {}; the expansion is now:\n{actual}",
                case.display(),
                snapshot.display()
            );
            mismatched.push(snapshot.display().to_string());
        }
    }
    assert!(
        mismatched.is_empty(),
        "expansion snapshots differ (review, then rerun with KUBEPLEX_BLESS=1 to accept): {mismatched:?}"
    );
}

#[test]
fn errors_are_accumulated_and_the_struct_is_kept() {
    let tokens = crate::attribute::controller_impl(
        quote::quote!(
            crd = A,
            contexts = [],
            namespace = ["x"],
            concurrency = 0,
            debounce = "5"
        ),
        quote::quote!(
            struct Keep;
        ),
    );
    let text = tokens.to_string();
    assert!(text.starts_with("struct Keep ;"), "{text}");
    assert_eq!(text.matches("compile_error").count(), 4, "{text}");
    assert!(text.contains("Did you mean `namespaces`?"), "{text}");
}

#[test]
fn wrong_items() {
    for item in [
        quote::quote!(
            enum E {}
        ),
        quote::quote!(
            union U {
                a: u8,
            }
        ),
        quote::quote!(
            fn f() {}
        ),
        quote::quote!(
            struct G<T>(T);
        ),
    ] {
        let text =
            crate::attribute::controller_impl(quote::quote!(crd = A, contexts = ["a"]), item)
                .to_string();
        assert_eq!(text.matches("compile_error").count(), 1, "{text}");
        assert!(!text.contains("impl"), "{text}");
    }
}
