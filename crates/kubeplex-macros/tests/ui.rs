//! Compile-time diagnostics of `#[controller]` and `contexts!`, pinned as `.stderr` files (trybuild).
//!
//! Each `tests/ui/<diagnostic>.rs` must fail to compile with exactly `tests/ui/<diagnostic>.stderr`. What
//! the attribute accepts is the `pass` test binary's: with no case that must build, trybuild only
//! type-checks, so kube and k8s-openapi are not built a second time in its own target directory.
//! rustc's wording changes between releases, so the `.stderr` files are only meaningful for the rustc
//! recorded in `tests/ui/RUSTC_VERSION`: on another rustc the build script leaves `kubeplex_pinned_rustc`
//! unset and this test is reported as *ignored* (neither failed nor silently passed). Under `CI=true` it is
//! never ignored: on another rustc it fails, naming the pinned one. `rust-toolchain.toml` selects the pinned
//! rustc for contributors and CI. Regenerate the files after a deliberate change with
//! `TRYBUILD=overwrite cargo test -p kubeplex-macros --test ui`, and review the diff.

#[test]
#[cfg_attr(
    all(not(kubeplex_pinned_rustc), not(kubeplex_ui_required)),
    ignore = "the ui .stderr files are pinned to the rustc in tests/ui/RUSTC_VERSION; run with that rustc"
)]
fn ui() {
    if !cfg!(kubeplex_pinned_rustc) {
        panic!(
            "CI=true: the ui .stderr files are pinned to rustc {}, and this build's rustc is another; \
             build with the toolchain in rust-toolchain.toml",
            include_str!("ui/RUSTC_VERSION").trim()
        );
    }
    // CI compares the diagnostics; `TRYBUILD=overwrite` would rewrite them and pass.
    let ci = std::env::var_os("CI").is_some_and(|v| v == "true");
    let overwrite = std::env::var_os("TRYBUILD").is_some();
    assert!(!(overwrite && ci), "TRYBUILD is refused under CI=true");
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
