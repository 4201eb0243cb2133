//! The `fleet` command line: usage, argument errors, and a reader that stops reading.

use kubeplex_testenv::output_within;
use std::io::Read as _;
use std::process::{Command, Stdio};
use std::time::Duration;

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
                "--members-from-secrets <SELECTOR>",
                "[env: FLEET_MEMBERS_FROM_SECRETS=]",
                "[default: kubeplex-system]",
                "--member-leave-policy <POLICY>",
                "[default: delete]",
            ],
        ),
        (&["help", "demo"], &["--exit-after-table"]),
    ];
    for (args, expected) in cases {
        let output = output_within(Command::new(FLEET).args(args), Duration::from_secs(60));
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
        let output = output_within(Command::new(FLEET).args(args), Duration::from_secs(60));
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

/// `fleet run` with only `env` (and a kubeconfig that does not exist, so it stops at once): its exit code
/// and stderr.
fn run_with_env(env: &[(&str, &str)]) -> (Option<i32>, String) {
    let output = output_within(
        Command::new(FLEET)
            .args(["run", "--probe-address", "127.0.0.1:0"])
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .env("RUST_LOG", "info")
            .env_remove("FLEET_MEMBERS_FROM_SECRETS")
            .env_remove("FLEET_MEMBERS_NAMESPACE")
            .env_remove("FLEET_MEMBER_LEAVE_POLICY")
            .envs(env.iter().copied()),
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code(), stderr)
}

#[test]
fn run_takes_the_member_flags_from_the_environment() {
    let (code, stderr) = run_with_env(&[
        ("FLEET_MEMBERS_FROM_SECRETS", "kubeplex.io/fleet=prod"),
        ("FLEET_MEMBERS_NAMESPACE", "fleet-system"),
        ("FLEET_MEMBER_LEAVE_POLICY", "orphan"),
    ]);
    // It got as far as reading the kubeconfig, having said where its members come from.
    assert_eq!(code, Some(1), "{stderr}");
    let said = stderr
        .lines()
        .find(|l| l.contains("members of the fleet from kubeconfig Secrets"))
        .unwrap_or_else(|| panic!("no line about the members:\n{stderr}"));
    for field in [
        "cluster=control",
        "namespace=fleet-system",
        "selector=kubeplex.io/fleet=prod",
        "policy=Orphan",
    ] {
        assert!(said.contains(field), "{field} not in {said}");
    }
    // Without the selector, the other two are refused rather than ignored, from the environment too.
    let (code, stderr) = run_with_env(&[("FLEET_MEMBERS_NAMESPACE", "fleet-system")]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("required arguments were not provided")
            && stderr.contains("--members-from-secrets <SELECTOR>"),
        "{stderr}"
    );
    let (code, stderr) = run_with_env(&[
        ("FLEET_MEMBERS_FROM_SECRETS", "kubeplex.io/fleet=prod"),
        ("FLEET_MEMBER_LEAVE_POLICY", "keep"),
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("invalid value 'keep' for '--member-leave-policy"),
        "{stderr}"
    );
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
    // Its output goes to the pipe, not through `output_within`: the test's deadline bounds the run.
    kubeplex_testenv::arm_test_deadline();
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

/// `fleet crd` prints both versions, `v2` served only with an endpoint that converts it.
#[test]
fn crd_prints_the_installable_definition() {
    let print = |args: &[&str]| {
        let output = output_within(Command::new(FLEET).args(args), Duration::from_secs(60));
        assert!(output.status.success());
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    let printed = print(&["crd"]);
    assert_eq!(
        printed,
        serde_json::to_value(kubeplex_fleet::admission::crd(None)).unwrap()
    );
    assert_eq!(
        printed["metadata"]["name"],
        "appdeployments.demo.kubeplex.dev"
    );
    let served = |crd: &serde_json::Value| {
        crd["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["served"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(served(&printed), [true, false]);
    let converted = print(&["crd", "--url", "https://127.0.0.1:9443/"]);
    assert_eq!(served(&converted), [true, true]);
    assert_eq!(
        converted["spec"]["conversion"]["webhook"]["clientConfig"]["url"],
        "https://127.0.0.1:9443/convert"
    );
}
