//! The `fleet` command line: usage, argument errors, and a reader that stops reading.

use std::io::Read as _;
use std::process::{Command, Stdio};

const FLEET: &str = env!("CARGO_BIN_EXE_fleet");

#[test]
fn help_prints_the_usage_on_stdout() {
    let cases: [(&[&str], &[&str]); 3] = [
        (
            &["--help"],
            &[
                "Usage: fleet [OPTIONS] <COMMAND>",
                "run",
                "demo",
                "crd",
                "--log-format <LOG_FORMAT>",
            ],
        ),
        (
            &["run", "--help"],
            &[
                "--probe-address <ADDRESS>",
                "[default: 0.0.0.0:8080]",
                "text",
                "json",
            ],
        ),
        (&["help", "demo"], &["--exit-after-table"]),
    ];
    for (args, expected) in cases {
        let output = Command::new(FLEET).args(args).output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {stdout}");
        for text in expected {
            assert!(
                stdout.contains(text),
                "{args:?}: expected {text:?} in {stdout}"
            );
        }
        assert!(!stdout.contains('\x1b'), "{args:?}: colour codes in a pipe");
    }
}

#[test]
fn a_bad_argument_is_named_and_exits_2() {
    let cases: [(&[&str], &str); 6] = [
        (&[], "Usage: fleet [OPTIONS] <COMMAND>"),
        (&["deploy"], "unrecognized subcommand 'deploy'"),
        (
            &["demo", "--exit-after"],
            "unexpected argument '--exit-after'",
        ),
        (&["crd", "--yaml"], "unexpected argument '--yaml'"),
        (
            &["run", "--probe-address", "everywhere"],
            "invalid value 'everywhere' for '--probe-address <ADDRESS>'",
        ),
        (
            &["run", "--log-format", "xml"],
            "invalid value 'xml' for '--log-format <LOG_FORMAT>'",
        ),
    ];
    for (args, expected) in cases {
        let output = Command::new(FLEET).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(expected),
            "{args:?}: expected {expected:?} in {stderr}"
        );
        assert!(
            output.stdout.is_empty(),
            "{args:?}: usage errors go to stderr"
        );
    }
}

fn assert_quiet_success(output: &std::process::Output) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{}: {stderr}", output.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(stderr, "", "a closed stdout is no error to report");
}

#[test]
fn crd_into_a_pipe_nobody_reads_exits_quietly() {
    // The reading end is closed before `fleet` writes anything: every write fails with EPIPE.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let output = Command::new(FLEET)
        .arg("crd")
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_quiet_success(&output);
}

#[test]
fn crd_into_a_reader_that_stops_early_exits_quietly() {
    // `fleet crd | head -c 5`
    let mut child = Command::new(FLEET)
        .arg("crd")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut start = [0; 5];
    child.stdout.take().unwrap().read_exact(&mut start).unwrap();
    assert_eq!(&start, b"{\n  \"");
    assert_quiet_success(&child.wait_with_output().unwrap());
}

#[test]
fn crd_prints_the_installable_definition() {
    let output = Command::new(FLEET).arg("crd").output().unwrap();
    assert!(output.status.success());
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        printed,
        serde_json::to_value(kubeplex_fleet::AppDeployment::installable_crd()).unwrap()
    );
    assert_eq!(
        printed["metadata"]["name"],
        "appdeployments.demo.kubeplex.dev"
    );
}
