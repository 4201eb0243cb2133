//! The upstream programs a cluster runs: kube-apiserver and etcd always, kube-controller-manager for the
//! clusters that ask for it. Found in `KUBEBUILDER_ASSETS`, in the cache, or built from Go modules
//! (`go_build.rs`) into the cache.

use std::fs::{self, File};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use super::go_build::{ETCD, KUBE_APISERVER, KUBE_CONTROLLER_MANAGER, build_error, build_into};
use super::progress::{self, USUAL_BUILD_TIME, USUAL_BUILD_TIME_ALL};
use crate::error::{Error, Result};

/// The Go module that pins k8s.io/kubernetes and etcd; its versions are the single source of truth.
const GO_MOD: &str = include_str!("../../assets/go.mod");

/// Where a directory of ready-made binaries can be named (controller-runtime's setup-envtest layout).
pub const KUBEBUILDER_ASSETS: &str = "KUBEBUILDER_ASSETS";
/// Overrides the cache directory the binaries are built into.
pub const CACHE_DIR_VAR: &str = "KUBEPLEX_TESTENV_CACHE";

/// The `kube-apiserver` and `etcd` programs, ready to run, and `kube-controller-manager` when it is there.
#[derive(Clone, Debug)]
pub struct Binaries {
    /// The directory holding the programs.
    pub dir: PathBuf,
    /// Path of `kube-apiserver`.
    pub kube_apiserver: PathBuf,
    /// Path of `etcd`.
    pub etcd: PathBuf,
    /// Path of `kube-controller-manager`, if the directory holds it (always after
    /// [`Binaries::locate_or_build_all`]).
    pub kube_controller_manager: Option<PathBuf>,
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

    /// Uses `KUBEBUILDER_ASSETS` when it names a directory with kube-apiserver and etcd, else the cache,
    /// building them into it first when they are not there yet (minutes on a cold machine; Go caches the
    /// rest). kube-controller-manager is found too when it is there, but never built.
    pub fn locate_or_build() -> Result<Self> {
        Self::locate_or_build_programs(false)
    }

    /// [`Binaries::locate_or_build`] with kube-controller-manager as well, for clusters that run one
    /// ([`TestEnvBuilder::controller_manager`](crate::TestEnvBuilder::controller_manager)): it is built
    /// into the cache when missing there, and a `KUBEBUILDER_ASSETS` directory without it is an error.
    pub fn locate_or_build_all() -> Result<Self> {
        Self::locate_or_build_programs(true)
    }

    fn locate_or_build_programs(with_controller_manager: bool) -> Result<Self> {
        if let Some(dir) = std::env::var_os(KUBEBUILDER_ASSETS) {
            let found = Self::in_dir(PathBuf::from(dir));
            let dir = found.dir.display();
            return if !found.complete(false) {
                Err(Error::Binaries(format!(
                    "{KUBEBUILDER_ASSETS}={dir} does not hold both kube-apiserver and etcd"
                )))
            } else if !found.complete(with_controller_manager) {
                Err(Error::Binaries(format!(
                    "{KUBEBUILDER_ASSETS}={dir} holds no kube-controller-manager, which a cluster asks \
                     for: put one there (`kubeplex-testenv build` builds one into its cache) or unset \
                     {KUBEBUILDER_ASSETS} to use the cache"
                )))
            } else {
                Ok(found)
            };
        }
        let cached = Self::in_dir(cache_dir()?);
        if cached.complete(with_controller_manager) {
            return Ok(cached);
        }
        fs::create_dir_all(&cached.dir).map_err(|e| build_error(&cached.dir, e))?;
        // Another test binary may be building the same cache: the lock makes the second one wait and reuse it.
        let (programs, time) = if with_controller_manager {
            (
                "kube-apiserver, etcd and kube-controller-manager",
                USUAL_BUILD_TIME_ALL,
            )
        } else {
            ("kube-apiserver and etcd", USUAL_BUILD_TIME)
        };
        let _lock = lock(&cached.dir.join(".lock"), || {
            progress::say(&format!(
                "waiting for another process that is building {programs} into {} \
                 (first run only; usually {time})",
                cached.dir.display()
            ));
        })
        .map_err(|e| build_error(&cached.dir, e))?;
        // Looked at again: the process we waited for may have built what we need.
        if !Self::in_dir(cached.dir.clone()).complete(with_controller_manager) {
            build_into(
                &cached.dir,
                with_controller_manager,
                Self::kubernetes_version(),
                Self::etcd_version(),
            )?;
        }
        Ok(Self::in_dir(cached.dir))
    }

    /// The paths of the programs in `dir`; kube-controller-manager only if it is there.
    fn in_dir(dir: PathBuf) -> Self {
        let kube_controller_manager =
            Some(dir.join(KUBE_CONTROLLER_MANAGER)).filter(|p| p.is_file());
        Self {
            kube_apiserver: dir.join(KUBE_APISERVER),
            etcd: dir.join(ETCD),
            kube_controller_manager,
            dir,
        }
    }

    /// Whether kube-apiserver and etcd are there, and kube-controller-manager if asked.
    fn complete(&self, with_controller_manager: bool) -> bool {
        self.kube_apiserver.is_file()
            && self.etcd.is_file()
            && (!with_controller_manager || self.kube_controller_manager.is_some())
    }
}

/// `$KUBEPLEX_TESTENV_CACHE`, else `$XDG_CACHE_HOME/kubeplex-testenv`, else `~/.cache/kubeplex-testenv`;
/// then one directory per pinned version pair, so a version bump never reuses stale programs. The cache
/// lives outside the checkout so that fresh clones (CI) reuse it.
fn cache_dir() -> Result<PathBuf> {
    Ok(cache_root()?.join(format!(
        "kubernetes-{}-etcd-{}",
        Binaries::kubernetes_version(),
        Binaries::etcd_version()
    )))
}

/// `$KUBEPLEX_TESTENV_CACHE`, else `$XDG_CACHE_HOME/kubeplex-testenv`, else `~/.cache/kubeplex-testenv`.
pub(super) fn cache_root() -> Result<PathBuf> {
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
    Ok(root)
}

fn module_version(module: &str) -> &'static str {
    required_version(GO_MOD, module)
        .unwrap_or_else(|| panic!("assets/go.mod does not require {module}"))
}

/// The version of `module` a go.mod's text requires.
pub(super) fn required_version(go_mod: &'static str, module: &str) -> Option<&'static str> {
    go_mod.lines().map(str::trim).find_map(|line| {
        let rest = line
            .strip_prefix(module)?
            .strip_prefix(char::is_whitespace)?;
        rest.split_whitespace()
            .next()
            .filter(|v| v.starts_with('v'))
    })
}

/// Takes an exclusive lock on `path`, calling `waiting` first if someone else holds it.
pub(super) fn lock(path: &Path, waiting: impl FnOnce()) -> io::Result<File> {
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
    }
}
