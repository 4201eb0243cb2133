//! Compile-time diagnostics of `#[controller]` and `contexts!`, pinned as `.stderr` files (trybuild).
//!
//! Each `tests/ui/<diagnostic>.rs` must fail to compile with exactly `tests/ui/<diagnostic>.stderr`;
//! each `tests/ui/pass/*.rs` must compile and run. rustc's wording changes between releases, so the
//! `.stderr` files are only meaningful for the rustc recorded in `tests/ui/RUSTC_VERSION`: on another
//! rustc this test FAILS (it is not silently skipped) unless `KUBEPLEX_UI_SKIP=1` is set, in which case
//! it prints a loud SKIPPED notice. Regenerate the files after a deliberate change with
//! `TRYBUILD=overwrite cargo test -p kubeplex --test ui`, and review the diff.

use std::process::Command;

#[test]
fn ui() {
    let pinned = include_str!("ui/RUSTC_VERSION").trim();
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let output = Command::new(&rustc)
        .arg("--version")
        .output()
        .expect("running rustc --version");
    let version = String::from_utf8_lossy(&output.stdout);
    let actual = version.split_whitespace().nth(1).unwrap_or("unknown");
    if actual != pinned {
        let message = format!(
            "the ui tests' .stderr files were made with rustc {pinned}, but this is rustc {actual}; \
             run them with rustc {pinned}, or set KUBEPLEX_UI_SKIP=1 to skip them knowingly"
        );
        if std::env::var_os("KUBEPLEX_UI_SKIP").is_some_and(|v| v == "1") {
            eprintln!("\n!!!!!!!! SKIPPED: {message} !!!!!!!!\n");
            return;
        }
        panic!("{message}");
    }

    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/*.rs");
}
