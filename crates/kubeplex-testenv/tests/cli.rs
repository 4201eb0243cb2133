//! The `kubeplex-testenv` command line.

use std::os::unix::fs::PermissionsExt as _;
use std::process::Command;
use std::time::{Duration, Instant};

use kube::config::Kubeconfig;
use kubeplex_testenv::{Binaries, Watched, output_within};

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
        (&["up", "--clusters", "Cluster_A"], "only lowercase letters"),
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

/// A directory with a stand-in `go`: `list` names three packages to compile, `build -v` "compiles" them
/// and writes its `-o` file.
fn fake_go() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    std::fs::write(
        &go,
        r#"#!/bin/sh
case "$1" in
list) echo "go: downloading example.com/mod v1.0.0" >&2; printf 'example.com/a\nexample.com/b\nexample.com/c\n' ;;
build)
  while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
  for p in a b c; do echo "example.com/$p" >&2; done
  printf '#!/bin/sh\n' > "$out" ;;
*) exit 1 ;;
esac
"#,
    )
    .unwrap();
    std::fs::set_permissions(&go, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn build_with(go: &std::path::Path, cache: &std::path::Path) -> Command {
    let path = format!("{}:{}", go.display(), std::env::var("PATH").unwrap());
    let mut command = Command::new(CLI);
    command
        .arg("build")
        .env("PATH", path)
        .env("KUBEPLEX_TESTENV_CACHE", cache)
        .env_remove("KUBEBUILDER_ASSETS");
    command
}

#[test]
fn a_first_build_says_what_it_builds_how_long_it_takes_and_how_far_it_is() {
    let go = fake_go();
    let cache = tempfile::tempdir().unwrap();
    let output = output_within(&mut build_with(go.path(), cache.path()), WAIT);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let (kubernetes, etcd) = (Binaries::kubernetes_version(), Binaries::etcd_version());
    for expected in [
        format!(
            "first run: building kube-apiserver {kubernetes}, etcd {etcd} and \
             kube-controller-manager {kubernetes} from Go modules"
        ),
        "usually takes 11-20 minutes".into(),
        "[1/3] kube-apiserver: resolving its packages".into(),
        "[1/3] kube-apiserver: compiling 3 packages".into(),
        "[1/3] kube-apiserver: 3 packages compiled, linking".into(),
        "[1/3] kube-apiserver: built in".into(),
        "[2/3] etcd: built in".into(),
        "[3/3] kube-controller-manager: built in".into(),
    ] {
        assert!(
            stderr.contains(&expected),
            "expected {expected:?} in\n{stderr}"
        );
    }
    assert!(
        !stderr.contains('\x1b'),
        "terminal codes in a log:\n{stderr}"
    );
    let dir = String::from_utf8(output.stdout).unwrap();
    assert!(
        dir.trim().starts_with(&cache.path().display().to_string()),
        "{dir}"
    );

    // The second run finds the programs: nothing is built, nothing is said.
    let again = output_within(&mut build_with(go.path(), cache.path()), WAIT);
    assert!(again.status.success());
    assert_eq!(String::from_utf8_lossy(&again.stderr), "");
}

#[test]
fn a_build_waiting_for_another_says_so() {
    let go = fake_go();
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().join(format!(
        "kubernetes-{}-etcd-{}",
        Binaries::kubernetes_version(),
        Binaries::etcd_version()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    // Another process is building: it holds the lock.
    let lock = std::fs::File::create(dir.join(".lock")).unwrap();
    // SAFETY: flock on a descriptor we own.
    assert_eq!(
        unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) },
        0
    );
    let mut waiting = Watched::spawn(
        "kubeplex-testenv build",
        &mut build_with(go.path(), cache.path()),
    )
    .unwrap();
    let line = waiting.wait_for_line(|line| !line.trim().is_empty(), WAIT);
    assert!(
        line.contains(
            "waiting for another process that is building kube-apiserver, etcd and \
             kube-controller-manager"
        ) && line.contains("first run only"),
        "{line}"
    );
    // The other process finishes: the waiting one uses its programs.
    for program in ["kube-apiserver", "etcd", "kube-controller-manager"] {
        std::fs::write(dir.join(program), "").unwrap();
    }
    drop(lock);
    let (status, lines) = waiting.wait(WAIT);
    assert!(status.success(), "{lines:#?}");
    let rest = &lines[1..];
    assert!(rest.iter().all(|l| !l.contains("building")), "{rest:#?}");
    assert_eq!(
        rest.iter().map(|l| l.trim()).collect::<Vec<_>>(),
        [dir.display().to_string()],
        "stdout is the directory, and nothing else is said"
    );
}

#[test]
fn build_prints_the_directory_holding_the_programs() {
    let output = output_within(Command::new(CLI).arg("build"), BUILD);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let dir = std::path::PathBuf::from(String::from_utf8(output.stdout).unwrap().trim());
    for program in ["kube-apiserver", "etcd", "kube-controller-manager"] {
        assert!(
            dir.join(program).is_file(),
            "{program} in {}",
            dir.display()
        );
    }
}

#[test]
fn kubebuilder_assets_is_used_as_is_when_it_holds_both_programs() {
    let built = output_within(
        Command::new(CLI)
            .arg("build")
            .env_remove("KUBEBUILDER_ASSETS"),
        BUILD,
    );
    let cache = String::from_utf8(built.stdout).unwrap().trim().to_owned();

    // setup-envtest's layout: a directory with both programs; nothing is built.
    let assets = tempfile::tempdir().unwrap();
    for program in ["kube-apiserver", "etcd"] {
        std::os::unix::fs::symlink(
            std::path::Path::new(&cache).join(program),
            assets.path().join(program),
        )
        .unwrap();
    }
    let used = output_within(
        Command::new(CLI)
            .arg("build")
            .env("KUBEBUILDER_ASSETS", assets.path()),
        WAIT,
    );
    assert!(
        used.status.success(),
        "{}",
        String::from_utf8_lossy(&used.stderr)
    );
    assert_eq!(
        String::from_utf8(used.stdout).unwrap().trim(),
        assets.path().display().to_string()
    );
    // setup-envtest's directories hold no kube-controller-manager: fine, until a cluster asks for one.
    let stderr = String::from_utf8_lossy(&used.stderr);
    assert!(
        stderr.contains("holds no kube-controller-manager"),
        "{stderr}"
    );
    let dir = tempfile::tempdir().unwrap();
    let refused = output_within(
        Command::new(CLI)
            .args(["up", "--clusters", "a", "--controller-manager", "a"])
            .arg("--kubeconfig")
            .arg(dir.path().join("kubeconfig"))
            .env("KUBEBUILDER_ASSETS", assets.path()),
        WAIT,
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("holds no kube-controller-manager, which a cluster asks for"),
        "{stderr}"
    );

    let empty = tempfile::tempdir().unwrap();
    let refused = output_within(
        Command::new(CLI)
            .arg("build")
            .env("KUBEBUILDER_ASSETS", empty.path()),
        WAIT,
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("KUBEBUILDER_ASSETS")
            && stderr.contains("does not hold both kube-apiserver and etcd"),
        "{stderr}"
    );
}

#[test]
fn a_controller_manager_that_exits_fails_the_start_with_its_log() {
    let built = output_within(
        Command::new(CLI)
            .arg("build")
            .env_remove("KUBEBUILDER_ASSETS"),
        BUILD,
    );
    let cache = String::from_utf8(built.stdout).unwrap().trim().to_owned();
    let assets = tempfile::tempdir().unwrap();
    for program in ["kube-apiserver", "etcd"] {
        std::os::unix::fs::symlink(
            std::path::Path::new(&cache).join(program),
            assets.path().join(program),
        )
        .unwrap();
    }
    let fake = assets.path().join("kube-controller-manager");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho \"fake controller manager: cannot start ($1)\" >&2\nexit 3\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let failed = output_within(
        Command::new(CLI)
            .args(["up", "--clusters", "a,b", "--controller-manager", "b"])
            .arg("--kubeconfig")
            .arg(dir.path().join("kubeconfig"))
            .env("KUBEBUILDER_ASSETS", assets.path()),
        WAIT,
    );
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert_eq!(failed.status.code(), Some(1), "{stderr}");
    for expected in [
        "cluster b: kube-controller-manager exited (exit status: 3)",
        "last lines of kube-controller-manager's log",
        "fake controller manager: cannot start (--kubeconfig=",
    ] {
        assert!(
            stderr.contains(expected),
            "expected {expected:?} in\n{stderr}"
        );
    }
}
