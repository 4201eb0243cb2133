//! Clusters shared by several programs: one runs them and writes an attach file
//! (`kubeplex-testenv up --attach-file PATH`, or [`TestEnv::write_attach_file`]); the others attach to them
//! ([`TestEnvBuilder::attach`]), and every [`SharedTestEnv`](crate::SharedTestEnv) does when [`ATTACH_VAR`]
//! names such a file. Test binaries that run one after another then pay for one start, not one each.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::builder::TestEnvBuilder;
use crate::control_plane::{Cluster, ClusterPki};
use crate::env::TestEnv;
use crate::error::{Error, Result, io_error};

/// The environment variable naming an attach file: each [`SharedTestEnv`](crate::SharedTestEnv) whose
/// clusters the file has attaches to them instead of starting its own.
pub const ATTACH_VAR: &str = "KUBEPLEX_TESTENV_ATTACH";

/// What a program needs to reach the clusters of another: their addresses, credentials and audit logs.
#[derive(Deserialize, Serialize)]
struct AttachFile {
    clusters: Vec<AttachedCluster>,
}

#[derive(Deserialize, Serialize)]
struct AttachedCluster {
    name: String,
    dir: PathBuf,
    apiserver_port: u16,
    audit_log: Option<PathBuf>,
    controller_manager: bool,
    pki: ClusterPki,
}

impl TestEnv {
    /// Writes to `path` what another program needs to attach to this environment's clusters (their
    /// addresses, admin credentials and audit logs), readable by this user alone, replacing the file at
    /// once. They stay this environment's: they end when it is dropped.
    pub fn write_attach_file(&self, path: &Path) -> Result<()> {
        let clusters = self
            .clusters
            .iter()
            .map(|(name, cluster)| {
                let cluster = cluster.lock();
                AttachedCluster {
                    name: name.clone(),
                    dir: cluster.dir().to_path_buf(),
                    apiserver_port: cluster.apiserver_port(),
                    audit_log: cluster.audit_log().map(Path::to_path_buf),
                    controller_manager: cluster.runs_controller_manager(),
                    pki: cluster.pki.clone(),
                }
            })
            .collect();
        let text = serde_json::to_vec(&AttachFile { clusters }).expect("an attach file serializes");
        let partial = path.with_extension("partial");
        let write = || -> std::io::Result<()> {
            use std::os::unix::fs::OpenOptionsExt as _;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&partial)?;
            file.write_all(&text)?;
            std::fs::rename(&partial, path)
        };
        write().map_err(io_error(format!("writing {}", path.display())))
    }
}

/// The attach file [`ATTACH_VAR`] names, if it is set and not empty.
pub(crate) fn attach_file_from_env() -> Option<PathBuf> {
    std::env::var_os(ATTACH_VAR)
        .filter(|path| !path.is_empty())
        .map(PathBuf::from)
}

impl TestEnvBuilder {
    /// Attaches to the clusters the attach file at `path` describes instead of starting any: those the
    /// builder names, with its CRDs installed (a CRD of the same name replaced by the builder's) and a
    /// kubeconfig of their own. [`TestEnv::audit_events`] gives only the events from the attach on. The
    /// clusters cannot be stopped, frozen or replaced through it ([`Error::Attached`]), and dropping it
    /// leaves them running. Fails, naming what is missing, when the file has not every cluster, or no
    /// audit log where the builder asks for one, or a controller manager other than where it asks for one.
    pub async fn attach(self, path: &Path) -> Result<TestEnv> {
        crate::deadline::arm_test_deadline();
        self.validate()?;
        let text = std::fs::read(path).map_err(io_error(format!("reading {}", path.display())))?;
        let file: AttachFile = serde_json::from_slice(&text).map_err(|error| Error::Io {
            what: format!("reading {}: not an attach file", path.display()),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, error),
        })?;
        let problem = |problem: String| Error::Attach {
            path: path.to_path_buf(),
            problem,
        };
        let mut env = self.empty_env()?;
        for name in self.cluster_names() {
            let known = || {
                let names: Vec<&str> = file.clusters.iter().map(|c| c.name.as_str()).collect();
                names.join(", ")
            };
            let cluster = file
                .clusters
                .iter()
                .find(|c| &c.name == name)
                .ok_or_else(|| problem(format!("no cluster {name} (it has: {})", known())))?;
            if self.wants_audit_log() && cluster.audit_log.is_none() {
                return Err(problem(format!("cluster {name} writes no audit log")));
            }
            // A controller manager changes what a cluster does (namespaces emptied, Deployments rolled
            // out): one is there exactly where the builder asks for one.
            let wanted = self.controller_manager_clusters().contains(name);
            if wanted != cluster.controller_manager {
                let runs = if cluster.controller_manager {
                    "runs a"
                } else {
                    "runs no"
                };
                let asked = if wanted { "asked for" } else { "not asked for" };
                return Err(problem(format!(
                    "cluster {name} {runs} kube-controller-manager ({asked})"
                )));
            }
            let audit_log = cluster.audit_log.clone().filter(|_| self.wants_audit_log());
            let attached = Cluster::attached(
                name,
                &cluster.dir,
                cluster.pki.clone(),
                cluster.apiserver_port,
                audit_log,
                cluster.controller_manager,
            );
            env.clusters.push((name.clone(), Mutex::new(attached)));
        }
        self.finish(env, true).await
    }
}
