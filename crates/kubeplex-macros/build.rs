//! Sets `cfg(kubeplex_pinned_rustc)` when this rustc is the one the ui tests' `.stderr` files were made
//! with (`tests/ui/RUSTC_VERSION`), so that `tests/ui.rs` is reported as ignored, with the reason, on any
//! other rustc instead of failing on rustc's changed wording — except in CI (`CI` set to `true`), where
//! `cfg(kubeplex_ui_required)` makes that test run and fail on a rustc that is not the pinned one.

use std::process::Command;

/// The rustc version the ui tests' `.stderr` files were made with.
const PINNED: &str = "tests/ui/RUSTC_VERSION";

fn main() {
    println!("cargo::rustc-check-cfg=cfg(kubeplex_pinned_rustc)");
    println!("cargo::rustc-check-cfg=cfg(kubeplex_ui_required)");
    println!("cargo::rerun-if-env-changed=CI");
    if std::env::var("CI").is_ok_and(|ci| ci.eq_ignore_ascii_case("true") || ci == "1") {
        println!("cargo::rustc-cfg=kubeplex_ui_required");
    }
    let Ok(pinned) = std::fs::read_to_string(PINNED) else {
        // The published package has no tests: nothing to compare, and no missing file to watch (cargo would
        // run this script again on every build).
        println!("cargo::rerun-if-changed=build.rs");
        return;
    };
    println!("cargo::rerun-if-changed={PINNED}");
    println!("cargo::rerun-if-env-changed=RUSTC");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    // `rustc 1.95.0 (59807616e 2026-04-14)`
    if version.split_whitespace().nth(1) == Some(pinned.trim()) {
        println!("cargo::rustc-cfg=kubeplex_pinned_rustc");
    }
}
