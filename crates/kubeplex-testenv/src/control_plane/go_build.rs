//! Building kube-apiserver, etcd and kube-controller-manager from the pinned Go module with the machine's `go`, reporting progress
//! (a cold build takes minutes).

use std::fs;
use std::io::{self, BufRead as _, BufReader, Read as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use super::progress::{
    self, Progress, USUAL_BUILD_TIME, USUAL_BUILD_TIME_ALL, USUAL_CONTROLLER_MANAGER_BUILD_TIME,
};
use crate::error::{Error, Result};

/// The directory of the Go module of the cluster's programs, where their go commands run.
const ASSETS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets");
/// The Go module of the tools that test what runs on a cluster (helm), apart from the cluster's programs so
/// that their Kubernetes libraries' versions are not unified with kube-apiserver's.
pub(super) const TOOLS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/tools");
/// The Go module of sig-multicluster's Cluster Inventory API (its credential plugins and CRD), apart from the
/// others for the same reason.
pub(super) const INVENTORY_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/inventory");

/// The programs' file names, in the cache and in `KUBEBUILDER_ASSETS`.
pub(super) const KUBE_APISERVER: &str = "kube-apiserver";
pub(super) const ETCD: &str = "etcd";
pub(super) const KUBE_CONTROLLER_MANAGER: &str = "kube-controller-manager";

/// What a failed file operation on `path` while providing the programs says.
pub(super) fn build_error(path: &Path, error: io::Error) -> Error {
    Error::Binaries(format!("{}: {error}", path.display()))
}

/// One program to build from the Go module.
pub(super) struct Program {
    pub(super) name: &'static str,
    pub(super) version: &'static str,
    pub(super) path: PathBuf,
    pub(super) package: &'static str,
    pub(super) ldflags: String,
    /// The Go module's directory: [`ASSETS_DIR`], [`TOOLS_DIR`] or [`INVENTORY_DIR`].
    pub(super) module: &'static str,
}

/// Builds the programs that are missing from `dir` into it: kube-apiserver and etcd, and
/// kube-controller-manager if asked, at the versions the Go module pins (`version` for Kubernetes').
pub(super) fn build_into(
    dir: &Path,
    with_controller_manager: bool,
    version: &'static str,
    etcd_version: &'static str,
) -> Result<()> {
    let (major, minor) = major_minor(version);
    let stamp = format!(
        "-s -w -X k8s.io/component-base/version.gitVersion={version} \
         -X k8s.io/component-base/version.gitMajor={major} \
         -X k8s.io/component-base/version.gitMinor={minor} \
         -X k8s.io/component-base/version.gitTreeState=clean"
    );
    let mut programs = vec![
        Program {
            name: KUBE_APISERVER,
            version,
            path: dir.join(KUBE_APISERVER),
            package: "k8s.io/kubernetes/cmd/kube-apiserver",
            ldflags: stamp.clone(),
            module: ASSETS_DIR,
        },
        Program {
            name: ETCD,
            version: etcd_version,
            path: dir.join(ETCD),
            package: "go.etcd.io/etcd/server/v3",
            ldflags: "-s -w".into(),
            module: ASSETS_DIR,
        },
    ];
    if with_controller_manager {
        // The same module as kube-apiserver: most of its packages are compiled already once that is built.
        programs.push(Program {
            name: KUBE_CONTROLLER_MANAGER,
            version,
            path: dir.join(KUBE_CONTROLLER_MANAGER),
            package: "k8s.io/kubernetes/cmd/kube-controller-manager",
            ldflags: stamp,
            module: ASSETS_DIR,
        });
    }
    let missing: Vec<&Program> = programs.iter().filter(|p| !p.path.is_file()).collect();
    let names: Vec<String> = missing
        .iter()
        .map(|p| format!("{} {}", p.name, p.version))
        .collect();
    progress::say(&format!(
        "first run: building {} from Go modules into {}",
        list(&names),
        dir.display()
    ));
    let time = match missing.as_slice() {
        [only] if only.name == KUBE_CONTROLLER_MANAGER => USUAL_CONTROLLER_MANAGER_BUILD_TIME,
        _ if with_controller_manager => USUAL_BUILD_TIME_ALL,
        _ => USUAL_BUILD_TIME,
    };
    progress::say(&format!(
        "this happens once per machine and usually takes {time}; later runs start in seconds"
    ));
    let started = Instant::now();
    for (i, program) in missing.iter().enumerate() {
        let label = format!("[{}/{}] {}", i + 1, missing.len(), program.name);
        build_program(program, Progress::stderr(label))?;
    }
    progress::say(&format!(
        "built in {}; kept in {}",
        progress::minutes(started.elapsed()),
        dir.display()
    ));
    Ok(())
}

/// `go build -v`, reporting how many of the packages still to compile are done.
pub(super) fn build_program(program: &Program, mut progress: Progress) -> Result<()> {
    // The packages whose compiled form is not in Go's build cache, i.e. what `go build` will compile
    // (this also downloads the modules). Only an estimate for the progress: a failure here is no error.
    let mut list = go(program.module);
    list.args([
        "list",
        "-deps",
        "-trimpath",
        "-f",
        "{{if .Stale}}{{.ImportPath}}{{end}}",
    ])
    .arg(program.package);
    let total = run_go(list, &mut progress)
        .ok()
        .filter(|out| out.status.success())
        .map(|out| out.stdout.lines().filter(|l| !l.is_empty()).count());
    progress.compiling(total);

    // Build beside the target and rename, so an interrupted build never leaves a half-written program.
    let partial = program.path.with_extension("partial");
    let mut build = go(program.module);
    build
        .args([
            "build",
            "-v",
            "-trimpath",
            "-ldflags",
            &program.ldflags,
            "-o",
        ])
        .arg(&partial)
        .arg(program.package);
    let package = program.package;
    let output = run_go(build, &mut progress)
        .map_err(|e| Error::Binaries(format!("cannot run `go` to build {package}: {e}")))?;
    if !output.status.success() {
        return Err(Error::Binaries(format!(
            "`go build {package}` in {} failed ({}):\n{}",
            program.module,
            output.status,
            output.messages.join("\n")
        )));
    }
    fs::rename(&partial, &program.path).map_err(|e| build_error(&program.path, e))?;
    progress.done();
    Ok(())
}

/// The go command, in the Go module `module`, with the settings every build uses.
pub(super) fn go(module: &str) -> Command {
    let mut command = Command::new("go");
    command
        .current_dir(module)
        .env("CGO_ENABLED", "0")
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=readonly");
    command
}

/// How many times a program that is "busy" (`ETXTBSY`) is tried again, 50 ms apart.
const BUSY_TRIES: u32 = 40;

/// Spawns `command`, trying again while its program is busy (`ETXTBSY`): a file just written (a toolchain
/// being installed, a test's stand-in `go`) stays busy while any process forked meanwhile, by this or
/// another thread, still holds it open for writing, until that process execs.
pub(super) fn spawn_when_not_busy(command: &mut Command) -> io::Result<Child> {
    let mut tries = 1;
    loop {
        match command.spawn() {
            Err(error) if error.raw_os_error() == Some(libc::ETXTBSY) && tries < BUSY_TRIES => {
                tries += 1;
                thread::sleep(Duration::from_millis(50));
            }
            spawned => return spawned,
        }
    }
}

/// What a go command printed, besides progress.
struct GoOutput {
    status: ExitStatus,
    stdout: String,
    /// Its stderr lines that are not progress: errors and warnings.
    messages: Vec<String>,
}

/// Runs a go command, feeding its stderr to `progress` line by line, and ticking it while the command
/// is quiet (a download, a long compile, the link).
fn run_go(mut command: Command, progress: &mut Progress) -> io::Result<GoOutput> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = spawn_when_not_busy(&mut command)?;
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let stdout = thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).map(|_| text)
    });
    let stderr = child.stderr.take().expect("stderr is piped");
    let (lines, received) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut messages = Vec::new();
    loop {
        match received.recv_timeout(Duration::from_secs(1)) {
            Ok(line) => {
                if !progress.go_output(&line) {
                    messages.push(line);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        progress.tick();
    }
    let status = child.wait()?;
    let stdout = stdout
        .join()
        .map_err(|_| io::Error::other("reading the go command's output panicked"))??;
    Ok(GoOutput {
        status,
        stdout,
        messages,
    })
}

/// `a`, `a and b`, `a, b and c`.
fn list(names: &[String]) -> String {
    match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

fn major_minor(version: &str) -> (&str, &str) {
    let mut parts = version.trim_start_matches('v').split('.');
    (parts.next().unwrap_or("0"), parts.next().unwrap_or("0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_still_open_for_writing_is_run_once_it_is_closed() {
        use std::io::Write as _;
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("go");
        let mut file = fs::File::create(&path).unwrap();
        file.write_all(b"#!/bin/sh\necho ran\n").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        // Open for writing: the program is busy.
        let error = Command::new(&path).spawn().unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::ETXTBSY));
        let closing = thread::spawn(move || {
            thread::sleep(Duration::from_millis(200));
            drop(file);
        });
        let mut command = Command::new(&path);
        command.stdout(Stdio::piped());
        let output = spawn_when_not_busy(&mut command)
            .unwrap()
            .wait_with_output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&output.stdout), "ran\n");
        closing.join().unwrap();
    }

    #[test]
    fn programs_are_listed_in_a_sentence() {
        let names = |n: &[&str]| n.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(list(&names(&["a"])), "a");
        assert_eq!(list(&names(&["a", "b"])), "a and b");
        assert_eq!(list(&names(&["a", "b", "c"])), "a, b and c");
    }

    #[test]
    fn the_version_stamp_takes_major_and_minor() {
        assert_eq!(major_minor("v1.37.2"), ("1", "37"));
    }
}
