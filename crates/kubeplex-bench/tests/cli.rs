//! The command line, without running a benchmark: usage on stdout, and bad arguments named.

use std::process::Command;
use std::time::Duration;

use kubeplex_testenv::output_within;

const BENCH: &str = env!("CARGO_BIN_EXE_kubeplex-bench");

/// The command line answers at once; this only keeps a hang from holding CI.
const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn help_prints_the_usage_on_stdout() {
    let output = output_within(Command::new(BENCH).arg("--help"), LIMIT);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    for flag in [
        "--quick",
        "--smoke",
        "--json <PATH>",
        "--repeats <R>",
        "--sections <SECTION[,SECTION..]>",
        "--link-rtt-ms <MS>",
        "KUBEPLEX_BENCH_CHILD_WRAPPER",
        "{n} is the child's number",
    ] {
        assert!(stdout.contains(flag), "{flag} missing from\n{stdout}");
        assert!(!stdout.contains('\x1b'), "styles in a pipe: {stdout:?}");
    }
}

#[test]
fn a_bad_argument_is_named_and_exits_2_before_any_cluster_starts() {
    let cases: [(&[&str], &str); 3] = [
        (
            &["--quick", "--sections", "memroy"],
            "no section \"memroy\"",
        ),
        (&["--link-rtt-ms", "0"], "--link-rtt-ms <MS>"),
        (&["--fast"], "unexpected argument '--fast'"),
    ];
    for (args, expected) in cases {
        let output = output_within(Command::new(BENCH).args(args), LIMIT);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(expected),
            "{args:?}: expected {expected:?} in {stderr}"
        );
        assert!(output.stdout.is_empty(), "{args:?}");
    }
}
