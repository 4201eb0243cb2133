//! `helm`, for tests that render and lint Helm charts: built from the pinned Go module `assets/tools` into
//! the cache, like the cluster's programs.

use std::fs;
use std::path::PathBuf;
use std::time::Instant;

use super::binaries::{cache_root, lock, required_version};
use super::go_build::{Program, TOOLS_DIR, build_error, build_program};
use super::progress::{self, Progress};
use crate::error::{Error, Result};

/// The Go module that pins helm.
const TOOLS_GO_MOD: &str = include_str!("../../assets/tools/go.mod");
/// Names a ready-made `helm` to use instead of building one.
pub const HELM_VAR: &str = "KUBEPLEX_HELM";
/// How long a cold build of helm usually takes, for the first message.
const USUAL_HELM_BUILD_TIME: &str = "3-6 minutes on 2 cores with empty Go caches";

/// The `helm` command line, built from the pinned Go module when the cache does not hold it yet.
#[derive(Clone, Copy, Debug)]
pub struct Helm;

impl Helm {
    /// The helm version the Go module pins, e.g. `v3.22.0`.
    pub fn version() -> &'static str {
        required_version(TOOLS_GO_MOD, "helm.sh/helm/v3")
            .expect("assets/tools/go.mod requires helm.sh/helm/v3")
    }

    /// `$KUBEPLEX_HELM` when set, else the cache's `helm-<version>/helm`, built into it first when it is
    /// not there yet (minutes on a cold machine; Go caches the rest).
    pub fn locate_or_build() -> Result<PathBuf> {
        if let Some(given) = std::env::var_os(HELM_VAR) {
            let given = PathBuf::from(given);
            return if given.is_file() {
                Ok(given)
            } else {
                Err(Error::Binaries(format!(
                    "{HELM_VAR}={} is not a file",
                    given.display()
                )))
            };
        }
        let dir = cache_root()?.join(format!("helm-{}", Self::version()));
        let path = dir.join("helm");
        if path.is_file() {
            return Ok(path);
        }
        fs::create_dir_all(&dir).map_err(|e| build_error(&dir, e))?;
        // Test binaries running at once build it once: the second waits for the first and reuses it.
        let _lock = lock(&dir.join(".lock"), || {
            progress::say(&format!(
                "waiting for another process that is building helm into {} (first run only; usually \
                 {USUAL_HELM_BUILD_TIME})",
                dir.display()
            ));
        })
        .map_err(|e| build_error(&dir, e))?;
        if !path.is_file() {
            progress::say(&format!(
                "first run: building helm {} from Go modules into {}; this happens once per machine \
                 and usually takes {USUAL_HELM_BUILD_TIME}",
                Self::version(),
                dir.display()
            ));
            let started = Instant::now();
            let program = Program {
                name: "helm",
                version: Self::version(),
                path: path.clone(),
                package: "helm.sh/helm/v3/cmd/helm",
                ldflags: ldflags(),
                module: TOOLS_DIR,
            };
            build_program(&program, Progress::stderr("helm"))?;
            progress::say(&format!(
                "built helm in {}",
                progress::minutes(started.elapsed())
            ));
        }
        Ok(path)
    }
}

/// The version stamp helm's own build sets: its version, and the Kubernetes version `helm template` and
/// `helm lint` assume without a cluster (that of its client-go, v0.X.Y meaning 1.X).
fn ldflags() -> String {
    let client_go = required_version(TOOLS_GO_MOD, "k8s.io/client-go")
        .expect("assets/tools/go.mod requires k8s.io/client-go");
    let minor = client_go.split('.').nth(1).unwrap_or("0");
    let mut flags = format!(
        "-s -w -X helm.sh/helm/v3/internal/version.version={} \
         -X helm.sh/helm/v3/internal/version.metadata= \
         -X helm.sh/helm/v3/internal/version.gitTreeState=clean",
        Helm::version()
    );
    for package in ["pkg/lint/rules", "pkg/chartutil"] {
        flags.push_str(&format!(
            " -X helm.sh/helm/v3/{package}.k8sVersionMajor=1 \
             -X helm.sh/helm/v3/{package}.k8sVersionMinor={minor}"
        ));
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_comes_from_the_tools_module() {
        assert!(Helm::version().starts_with("v3."), "{}", Helm::version());
        assert!(
            ldflags().contains("chartutil.k8sVersionMinor=3"),
            "{}",
            ldflags()
        );
    }
}
