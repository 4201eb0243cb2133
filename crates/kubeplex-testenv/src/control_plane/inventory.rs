//! sig-multicluster's Cluster Inventory API for tests: its credential plugins, built from the pinned Go module
//! `assets/inventory` into the cache like helm, and its ClusterProfile CRD, copied out of that module.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Deserialize;

use super::binaries::{cache_root, lock, required_version};
use super::go_build::{
    INVENTORY_DIR, Program, build_error, build_program, go, spawn_when_not_busy,
};
use super::progress::{self, Progress};
use crate::error::{Error, Result};

/// The Go module that pins the Cluster Inventory API.
const INVENTORY_GO_MOD: &str = include_str!("../../assets/inventory/go.mod");
/// The upstream module.
const MODULE: &str = "sigs.k8s.io/cluster-inventory-api";
/// The ClusterProfile CRD's file in the upstream module.
const UPSTREAM_CRD: &str = "config/crd/bases/multicluster.x-k8s.io_clusterprofiles.yaml";
/// The plugins' file names in the cache, and their Go packages.
const SECRETREADER: &str = "secretreader";
const KUBECONFIG_SECRETREADER: &str = "kubeconfig-secretreader";
const PLUGINS: [(&str, &str); 2] = [
    (
        SECRETREADER,
        "sigs.k8s.io/cluster-inventory-api/plugins/secretreader/cmd/plugin",
    ),
    (
        KUBECONFIG_SECRETREADER,
        "sigs.k8s.io/cluster-inventory-api/plugins/kubeconfig-secretreader/cmd/plugin",
    ),
];
/// The CRD's file name in the cache.
const CRD_YAML: &str = "clusterprofiles-crd.yaml";
/// How long a cold build of the plugins usually takes, for the first message.
const USUAL_INVENTORY_BUILD_TIME: &str = "2-3 minutes on 2 cores with empty Go caches";

/// sig-multicluster's Cluster Inventory API (`sigs.k8s.io/cluster-inventory-api`) at the version the Go
/// module pins: its two credential plugins (exec programs that print a `client.authentication.k8s.io/v1`
/// `ExecCredential`) and its ClusterProfile CRD, in the cache, built into it when they are not there yet.
#[derive(Clone, Debug)]
pub struct ClusterInventory {
    secretreader: PathBuf,
    kubeconfig_secretreader: PathBuf,
    crd_yaml: PathBuf,
}

impl ClusterInventory {
    /// The cluster-inventory-api version the Go module pins, e.g. `v0.1.0`.
    pub fn version() -> &'static str {
        required_version(INVENTORY_GO_MOD, MODULE)
            .expect("assets/inventory/go.mod requires sigs.k8s.io/cluster-inventory-api")
    }

    /// The cache's `cluster-inventory-<version>/`, with the plugins built and the CRD copied into it first
    /// when they are not all there yet (minutes on a cold machine; Go caches the rest).
    pub fn locate_or_build() -> Result<Self> {
        let dir = cache_root()?.join(format!("cluster-inventory-{}", Self::version()));
        let found = Self::in_dir(&dir);
        if found.complete() {
            return Ok(found);
        }
        fs::create_dir_all(&dir).map_err(|e| build_error(&dir, e))?;
        // Test binaries running at once build it once: the second waits for the first and reuses it.
        let _lock = lock(&dir.join(".lock"), || {
            progress::say(&format!(
                "waiting for another process that is building the Cluster Inventory API's plugins into {} \
                 (first run only; usually {USUAL_INVENTORY_BUILD_TIME})",
                dir.display()
            ));
        })
        .map_err(|e| build_error(&dir, e))?;
        if !found.complete() {
            found.build(&dir)?;
        }
        Ok(found)
    }

    /// The `secretreader` plugin. Run with an `ExecCredential` in `$KUBERNETES_EXEC_INFO` (an exec config
    /// with `provideClusterInfo: true`) whose `spec.cluster.config` holds `clusterName`, it prints as the
    /// token the key `token` of the Secret `<namespace>/<clusterName>`, the namespace being that of the
    /// current context of its `$KUBECONFIG` (else `default`). Both plugins read their Secret from the
    /// cluster of the in-cluster config, else of `$KUBECONFIG`, and panic with neither.
    pub fn secretreader(&self) -> &Path {
        &self.secretreader
    }

    /// The `kubeconfig-secretreader` plugin. Run like [`secretreader`](Self::secretreader), it reads a
    /// kubeconfig from the Secret that the `ExecCredential`'s `spec.cluster.config` names: `name` (the
    /// Secret) and `key` (its data key), optional `namespace` (else that of its `$KUBECONFIG`'s current
    /// context, else `default`) and `context` (else the stored kubeconfig's current context); it prints
    /// that context's user's token and/or inline client certificate and key.
    pub fn kubeconfig_secretreader(&self) -> &Path {
        &self.kubeconfig_secretreader
    }

    /// The upstream ClusterProfile CRD (`clusterprofiles.multicluster.x-k8s.io`), as YAML.
    pub fn crd_yaml(&self) -> &Path {
        &self.crd_yaml
    }

    fn in_dir(dir: &Path) -> Self {
        Self {
            secretreader: dir.join(SECRETREADER),
            kubeconfig_secretreader: dir.join(KUBECONFIG_SECRETREADER),
            crd_yaml: dir.join(CRD_YAML),
        }
    }

    /// Whether all three files are there (each is written under another name and renamed).
    fn complete(&self) -> bool {
        [
            &self.secretreader,
            &self.kubeconfig_secretreader,
            &self.crd_yaml,
        ]
        .iter()
        .all(|p| p.is_file())
    }

    /// Copies the CRD and builds the plugins that are missing from `dir`.
    fn build(&self, dir: &Path) -> Result<()> {
        progress::say(&format!(
            "first run: building the Cluster Inventory API {} (secretreader, kubeconfig-secretreader and \
             the ClusterProfile CRD) from Go modules into {}; this happens once per machine and usually \
             takes {USUAL_INVENTORY_BUILD_TIME}",
            Self::version(),
            dir.display()
        ));
        let started = Instant::now();
        if !self.crd_yaml.is_file() {
            copy_crd(&self.crd_yaml)?;
        }
        let missing: Vec<_> = PLUGINS
            .iter()
            .filter(|(name, _)| !dir.join(name).is_file())
            .collect();
        for (i, &&(name, package)) in missing.iter().enumerate() {
            let program = Program {
                name,
                version: Self::version(),
                path: dir.join(name),
                package,
                ldflags: "-s -w".into(),
                module: INVENTORY_DIR,
            };
            let label = format!("[{}/{}] {name}", i + 1, missing.len());
            build_program(&program, Progress::stderr(label))?;
        }
        progress::say(&format!(
            "built the Cluster Inventory API in {}",
            progress::minutes(started.elapsed())
        ));
        Ok(())
    }
}

/// What `go mod download -json` says of a module.
#[derive(Deserialize)]
struct Downloaded {
    #[serde(rename = "Dir")]
    dir: Option<PathBuf>,
    #[serde(rename = "Error")]
    error: Option<String>,
}

/// Copies the upstream CRD out of the module (downloaded if need be) to `to`, through a temporary name.
fn copy_crd(to: &Path) -> Result<()> {
    let module = format!("{MODULE}@{}", ClusterInventory::version());
    let mut download = go(INVENTORY_DIR);
    download
        .args(["mod", "download", "-json", &module])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let output = spawn_when_not_busy(&mut download)
        .and_then(std::process::Child::wait_with_output)
        .map_err(|e| Error::Binaries(format!("cannot run `go mod download {module}`: {e}")))?;
    let downloaded: Option<Downloaded> = serde_json::from_slice(&output.stdout).ok();
    let dir = match downloaded {
        Some(Downloaded { dir: Some(dir), .. }) if output.status.success() => dir,
        other => {
            let error = other.and_then(|d| d.error).unwrap_or_default();
            return Err(Error::Binaries(format!(
                "`go mod download {module}` in {INVENTORY_DIR} failed ({}): {error}\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
    };
    let from = dir.join(UPSTREAM_CRD);
    let crd = fs::read(&from).map_err(|e| build_error(&from, e))?;
    let partial = to.with_extension("partial");
    fs::write(&partial, crd).map_err(|e| build_error(&partial, e))?;
    fs::rename(&partial, to).map_err(|e| build_error(to, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_comes_from_the_inventory_module() {
        assert!(
            ClusterInventory::version().starts_with("v0."),
            "{}",
            ClusterInventory::version()
        );
    }
}
