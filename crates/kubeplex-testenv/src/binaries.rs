//! The two upstream programs a cluster runs: found in `KUBEBUILDER_ASSETS`, in the cache, or built from Go modules.

use std::fs::{self, File};
use std::io::{self, BufRead as _, BufReader, Read as _};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::progress::{self, Progress, USUAL_BUILD_TIME};

/// The Go module that pins k8s.io/kubernetes and etcd; its versions are the single source of truth.
const GO_MOD: &str = include_str!("../assets/go.mod");
const ASSETS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets");

/// Where a directory of ready-made binaries can be named (controller-runtime's setup-envtest layout).
pub const KUBEBUILDER_ASSETS: &str = "KUBEBUILDER_ASSETS";
/// Overrides the cache directory the binaries are built into.
pub const CACHE_DIR_VAR: &str = "KUBEPLEX_TESTENV_CACHE";

/// The `kube-apiserver` and `etcd` programs, ready to run.
#[derive(Clone, Debug)]
pub struct Binaries {
    /// The directory holding both programs.
    pub dir: PathBuf,
    /// Path of `kube-apiserver`.
    pub kube_apiserver: PathBuf,
    /// Path of `etcd`.
    pub etcd: PathBuf,
}

impl Binaries {
    /// The Kubernetes version the Go module pins, e.g. `v1.37.2`.
    pub fn kubernetes_version() -> &'static str {
        module_version("k8s.io/kubernetes")
    }

    /// The etcd version the Go module pins, e.g. `v3.7.0`.
    pub fn etcd_version() -> &'static str {
        module_version("go.etcd.io/etcd/server/v3")
    }

    /// Uses `KUBEBUILDER_ASSETS` when it names a directory with both programs, else the cache, building
    /// into it first when the programs are not there yet (minutes on a cold machine; Go caches the rest).
    pub fn locate_or_build() -> Result<Self> {
        if let Some(dir) = std::env::var_os(KUBEBUILDER_ASSETS) {
            let found = Self::in_dir(PathBuf::from(dir));
            return if found.complete() {
                Ok(found)
            } else {
                Err(Error::Binaries(format!(
                    "{KUBEBUILDER_ASSETS}={} does not hold both kube-apiserver and etcd",
                    found.dir.display()
                )))
            };
        }
        let cached = Self::in_dir(cache_dir()?);
        if cached.complete() {
            return Ok(cached);
        }
        fs::create_dir_all(&cached.dir).map_err(|e| build_error(&cached.dir, e))?;
        // Another test binary may be building the same cache: the lock makes the second one wait and reuse it.
        let _lock = lock(&cached.dir.join(".lock"), || {
            progress::say(&format!(
                "waiting for another process that is building kube-apiserver and etcd into {} \
                 (first run only; usually {USUAL_BUILD_TIME})",
                cached.dir.display()
            ));
        })
        .map_err(|e| build_error(&cached.dir, e))?;
        if !cached.complete() {
            build_into(&cached)?;
        }
        Ok(cached)
    }

    fn in_dir(dir: PathBuf) -> Self {
        Self {
            kube_apiserver: dir.join("kube-apiserver"),
            etcd: dir.join("etcd"),
            dir,
        }
    }

    fn complete(&self) -> bool {
        self.kube_apiserver.is_file() && self.etcd.is_file()
    }
}

/// `$KUBEPLEX_TESTENV_CACHE`, else `$XDG_CACHE_HOME/kubeplex-testenv`, else `~/.cache/kubeplex-testenv`;
/// then one directory per pinned version pair, so a version bump never reuses stale programs. The cache
/// lives outside the checkout so that fresh clones (CI) reuse it.
fn cache_dir() -> Result<PathBuf> {
    let root = if let Some(dir) = std::env::var_os(CACHE_DIR_VAR) {
        PathBuf::from(dir)
    } else if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        PathBuf::from(dir).join("kubeplex-testenv")
    } else if let Some(home) = std::env::var_os("HOME") {
        PathBuf::from(home).join(".cache/kubeplex-testenv")
    } else {
        return Err(Error::Binaries(format!(
            "no cache directory: set {CACHE_DIR_VAR} or HOME"
        )));
    };
    Ok(root.join(format!(
        "kubernetes-{}-etcd-{}",
        Binaries::kubernetes_version(),
        Binaries::etcd_version()
    )))
}

/// One program to build from the Go module.
struct Program<'a> {
    name: &'static str,
    version: &'static str,
    path: &'a Path,
    package: &'static str,
    ldflags: String,
}

fn build_into(target: &Binaries) -> Result<()> {
    let version = Binaries::kubernetes_version();
    let (major, minor) = major_minor(version);
    let stamp = format!(
        "-s -w -X k8s.io/component-base/version.gitVersion={version} \
         -X k8s.io/component-base/version.gitMajor={major} \
         -X k8s.io/component-base/version.gitMinor={minor} \
         -X k8s.io/component-base/version.gitTreeState=clean"
    );
    let programs = [
        Program {
            name: "kube-apiserver",
            version,
            path: &target.kube_apiserver,
            package: "k8s.io/kubernetes/cmd/kube-apiserver",
            ldflags: stamp,
        },
        Program {
            name: "etcd",
            version: Binaries::etcd_version(),
            path: &target.etcd,
            package: "go.etcd.io/etcd/server/v3",
            ldflags: "-s -w".into(),
        },
    ];
    let missing: Vec<&Program<'_>> = programs.iter().filter(|p| !p.path.is_file()).collect();
    let names: Vec<String> = missing
        .iter()
        .map(|p| format!("{} {}", p.name, p.version))
        .collect();
    progress::say(&format!(
        "first run: building {} from Go modules into {}",
        names.join(" and "),
        target.dir.display()
    ));
    progress::say(&format!(
        "this happens once per machine and usually takes {USUAL_BUILD_TIME}; later runs start in seconds"
    ));
    let started = Instant::now();
    for (i, program) in missing.iter().enumerate() {
        let label = format!("[{}/{}] {}", i + 1, missing.len(), program.name);
        build_program(program, Progress::stderr(label))?;
    }
    progress::say(&format!(
        "built in {}; kept in {}",
        progress::minutes(started.elapsed()),
        target.dir.display()
    ));
    Ok(())
}

/// `go build -v`, reporting how many of the packages still to compile are done.
fn build_program(program: &Program<'_>, mut progress: Progress) -> Result<()> {
    // The packages whose compiled form is not in Go's build cache, i.e. what `go build` will compile
    // (this also downloads the modules). Only an estimate for the progress: a failure here is no error.
    let mut list = go();
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
    let mut build = go();
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
            "`go build {package}` in {ASSETS_DIR} failed ({}):\n{}",
            output.status,
            output.messages.join("\n")
        )));
    }
    fs::rename(&partial, program.path).map_err(|e| build_error(program.path, e))?;
    progress.done();
    Ok(())
}

/// The go command, in the assets module, with the settings every build uses.
fn go() -> Command {
    let mut command = Command::new("go");
    command
        .current_dir(ASSETS_DIR)
        .env("CGO_ENABLED", "0")
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=readonly");
    command
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
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
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

fn module_version(module: &str) -> &'static str {
    GO_MOD
        .lines()
        .map(str::trim)
        .find_map(|line| {
            let rest = line
                .strip_prefix(module)?
                .strip_prefix(char::is_whitespace)?;
            rest.split_whitespace()
                .next()
                .filter(|v| v.starts_with('v'))
        })
        .unwrap_or_else(|| panic!("assets/go.mod does not require {module}"))
}

fn major_minor(version: &str) -> (&str, &str) {
    let mut parts = version.trim_start_matches('v').split('.');
    (parts.next().unwrap_or("0"), parts.next().unwrap_or("0"))
}

/// Takes an exclusive lock on `path`, calling `waiting` first if someone else holds it.
fn lock(path: &Path, waiting: impl FnOnce()) -> io::Result<File> {
    let file = File::create(path)?;
    // SAFETY: flock on a descriptor we own; the lock is released when `file` is closed.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(file);
    }
    let error = io::Error::last_os_error();
    if error.kind() != io::ErrorKind::WouldBlock {
        return Err(error);
    }
    waiting();
    // SAFETY: as above, now waiting for the holder to finish.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}

fn build_error(path: &Path, error: io::Error) -> Error {
    Error::Binaries(format!("{}: {error}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_come_from_the_go_module() {
        assert!(
            Binaries::kubernetes_version().starts_with("v1."),
            "{}",
            Binaries::kubernetes_version()
        );
        assert!(
            Binaries::etcd_version().starts_with("v3."),
            "{}",
            Binaries::etcd_version()
        );
        assert_eq!(major_minor("v1.37.2"), ("1", "37"));
    }
}
