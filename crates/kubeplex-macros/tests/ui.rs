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
    // trybuild checks its project's dependencies with its flags, then the cases with one flag more
    // (`--diagnostic-width=140`): a change of flags, so cargo checks kube, k8s-openapi and kubeplex a second
    // time (~30 s of the suite's ~100). Given the cases' flags from the start in CARGO_ENCODED_RUSTFLAGS,
    // which cargo takes over trybuild's `--config` rustflags, both share one check. These are trybuild
    // 1.0.122's flags (`src/rustflags.rs` and `cargo::build_all_tests`); were they to change, the cases
    // would still be checked, only with these.
    const TRYBUILD_RUSTFLAGS: [&str; 6] = [
        "--cfg",
        "trybuild",
        "--verbose",
        "-A",
        "dead_code",
        "--diagnostic-width=140",
    ];
    // SAFETY: this is the binary's only test, so no other thread reads or writes the environment now.
    unsafe { std::env::set_var("CARGO_ENCODED_RUSTFLAGS", TRYBUILD_RUSTFLAGS.join("\x1f")) };
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
