//! The `kubeplex-testenv` command line: `up` here, `build` and where the programs come from in `build.rs`.

mod build;

use std::process::Command;
use std::time::{Duration, Instant};

use kube::config::Kubeconfig;
use kubeplex_testenv::{Watched, output_within};

const CLI: &str = env!("CARGO_BIN_EXE_kubeplex-testenv");
/// Bounds every wait on the CLI: a hung CLI fails its test with what it printed.
const WAIT: Duration = Duration::from_secs(120);
/// For `build` with the real Go toolchain, which builds for minutes when nothing is cached.
const BUILD: Duration = Duration::from_secs(40 * 60);

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !stat.contains(") Z "))
}

/// Every process whose parent is `pid` (the clusters' programs are direct children of the CLI).
fn children(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // Fields after the parenthesised command name: state, ppid, ...
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        if after.split(' ').nth(1).and_then(|p| p.parse::<u32>().ok()) == Some(pid) {
            found.push(child);
        }
    }
    found
}

fn wait_gone(pids: &[u32]) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if pids.iter().all(|&pid| !alive(pid)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Starts `up` and returns it once it printed its `ready` line (and that line).
fn up(clusters: &str, kubeconfig: &std::path::Path) -> (Watched, String) {
    up_with(clusters, kubeconfig, &[])
}

/// [`up`] with more arguments.
fn up_with(clusters: &str, kubeconfig: &std::path::Path, more: &[&str]) -> (Watched, String) {
    let mut child = Watched::spawn(
        "kubeplex-testenv up",
        Command::new(CLI)
            .args(["up", "--clusters", clusters, "--kubeconfig"])
            .arg(kubeconfig)
            .args(more),
    )
    .unwrap();
    let ready = child.wait_for_line(|line| line.starts_with("ready"), WAIT);
    (child, ready)
}

#[test]
fn up_writes_the_kubeconfig_prints_ready_and_cleans_up_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let (child, ready) = up("control,cluster-a", &kubeconfig);
    assert!(ready.contains("control, cluster-a"), "{ready}");

    let written = Kubeconfig::read_from(&kubeconfig).unwrap();
    let names: Vec<&str> = written.contexts.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["control", "cluster-a"]);
    let programs = children(child.id());
    assert_eq!(
        programs.len(),
        4,
        "two clusters, two programs each: {programs:?}"
    );

    // SAFETY: signals our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let (status, output) = child.wait(WAIT);
    assert_eq!(status.code(), Some(0), "{status}: {output:#?}");
    assert!(
        wait_gone(&programs),
        "processes outlived the CLI: {programs:?}"
    );
}

#[test]
fn a_killed_cli_leaves_no_cluster_behind() {
    let dir = tempfile::tempdir().unwrap();
    let (child, _) = up_with(
        "orphan-check",
        &dir.path().join("kubeconfig"),
        &["--controller-manager", "orphan-check"],
    );
    let programs = children(child.id());
    assert_eq!(
        programs.len(),
        3,
        "etcd, kube-apiserver and kube-controller-manager: {programs:?}"
    );
    // SIGKILL to the CLI alone: no destructor, no atexit; the kernel's parent-death signal must do it.
    // SAFETY: signals our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
    child.wait(WAIT);
    assert!(
        wait_gone(&programs),
        "processes outlived a killed CLI: {programs:?}"
    );
}

#[test]
fn invalid_arguments_exit_2_and_name_the_argument() {
    let cases: [(&[&str], &str); 9] = [
        (&[], "Usage: kubeplex-testenv <COMMAND>"),
        (&["up"], "--clusters <NAME[,NAME...]>"),
        (
            &["up", "--clusters", ""],
            "--clusters: invalid cluster name \"\"",
        ),
        (
            &["up", "--clusters", "a,b,a"],
            "--clusters: invalid cluster name \"a\": named twice",
        ),
        (
            &["up", "--clusters", "Cluster_A"],
            "it contains 'C' (lowercase it)",
        ),
        (
            &["up", "--clusters", "a", "--bogus"],
            "unexpected argument '--bogus'",
        ),
        (
            &["up", "--clusters", "a", "--controller-manager", "b"],
            "--controller-manager: no cluster named \"b\"",
        ),
        (
            &[
                "up",
                "--clusters",
                "a",
                "--kubeconfig",
                "/proc/kubeplex/kubeconfig",
            ],
            "cannot write the kubeconfig",
        ),
        (&["launch"], "unrecognized subcommand 'launch'"),
    ];
    for (args, expected) in cases {
        let output = output_within(Command::new(CLI).args(args), WAIT);
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

#[test]
fn help_prints_the_usage_on_stdout() {
    let cases: [(&[&str], &[&str]); 3] = [
        (
            &["--help"],
            &["Usage: kubeplex-testenv <COMMAND>", "up", "build"],
        ),
        (
            &["help", "up"],
            &[
                "--clusters <NAME[,NAME...]>",
                "--kubeconfig <PATH>",
                "--controller-manager <NAME[,NAME...]>",
            ],
        ),
        (&["up", "-h"], &["--clusters <NAME[,NAME...]>"]),
    ];
    for (args, expected) in cases {
        let output = output_within(Command::new(CLI).args(args), WAIT);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {stdout}");
        for text in expected {
            assert!(
                stdout.contains(text),
                "{args:?}: expected {text:?} in {stdout}"
            );
        }
    }
}
