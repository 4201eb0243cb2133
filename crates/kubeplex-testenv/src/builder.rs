//! Configuring and starting a [`TestEnv`]: which clusters, which CRDs, where the kubeconfig goes.

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::config::Kubeconfig;
use parking_lot::Mutex;

use crate::control_plane::{Binaries, Cluster, WorkDir};
use crate::env::{DEFAULT_START_TIMEOUT, TestEnv};
use crate::error::{Error, Result};

/// Configures and starts a [`TestEnv`].
#[derive(Clone, Debug, Default)]
pub struct TestEnvBuilder {
    clusters: Vec<String>,
    crds: Vec<(String, CustomResourceDefinition)>,
    start_timeout: Option<Duration>,
    kubeconfig_path: Option<PathBuf>,
    audit_log: bool,
    controller_managers: Vec<String>,
}

impl TestEnvBuilder {
    /// Adds a cluster; its kubeconfig context gets the same name.
    #[must_use]
    pub fn cluster(mut self, name: impl Into<String>) -> Self {
        self.clusters.push(name.into());
        self
    }

    /// Adds several clusters.
    #[must_use]
    pub fn clusters<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.clusters.extend(names.into_iter().map(Into::into));
        self
    }

    /// Installs `crd` in `cluster` once it is up; `start` returns when the CRD is established.
    #[must_use]
    pub fn crd(mut self, cluster: impl Into<String>, crd: CustomResourceDefinition) -> Self {
        self.crds.push((cluster.into(), crd));
        self
    }

    /// How long `start` waits for all clusters to be ready (default [`DEFAULT_START_TIMEOUT`]).
    #[must_use]
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.start_timeout = Some(timeout);
        self
    }

    /// Writes the kubeconfig here instead of inside the environment's temporary directory.
    #[must_use]
    pub fn kubeconfig_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.kubeconfig_path = Some(path.into());
        self
    }

    /// Makes every API server write an audit log (one event per request at `Metadata` level), read with
    /// [`TestEnv::audit_events`]. Off by default.
    #[must_use]
    pub fn audit_log(mut self, on: bool) -> Self {
        self.audit_log = on;
        self
    }

    /// Runs an upstream `kube-controller-manager` for `cluster`, so that it behaves more like a real
    /// cluster: deleted namespaces are emptied and go away, objects whose owners are gone are garbage
    /// collected, and Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs and CronJobs get their
    /// controllers' objects and status ([`CONTROLLER_MANAGER_CONTROLLERS`] lists them). No kubelet or
    /// scheduler runs, so Pods stay `Pending`.
    ///
    /// It starts once the cluster's API server is ready, and `start` waits until its `/healthz` reports
    /// every controller; it is stopped and started again with the API server ([`TestEnv::stop`],
    /// [`TestEnv::start`]). Off by default: other clusters start as fast as before. The first use on a
    /// machine builds the program (3-5 minutes on 2 cores once kube-apiserver is built); with
    /// `KUBEBUILDER_ASSETS`, that directory must hold it.
    ///
    /// [`CONTROLLER_MANAGER_CONTROLLERS`]: crate::CONTROLLER_MANAGER_CONTROLLERS
    #[must_use]
    pub fn controller_manager(mut self, cluster: impl Into<String>) -> Self {
        self.controller_managers.push(cluster.into());
        self
    }

    /// [`TestEnvBuilder::controller_manager`] for several clusters.
    #[must_use]
    pub fn controller_managers<S: Into<String>>(
        mut self,
        clusters: impl IntoIterator<Item = S>,
    ) -> Self {
        self.controller_managers
            .extend(clusters.into_iter().map(Into::into));
        self
    }

    /// Checks the configuration without starting anything.
    pub fn validate(&self) -> Result<()> {
        if self.clusters.is_empty() {
            return Err(Error::NoClusters);
        }
        for (i, name) in self.clusters.iter().enumerate() {
            // It names a directory and a kubeconfig context: a DNS-1123 label.
            if let Err(reason) = kubeplex_names::dns_label(name) {
                return Err(Error::InvalidClusterName {
                    name: name.clone(),
                    reason,
                });
            }
            if self.clusters[..i].contains(name) {
                return Err(Error::InvalidClusterName {
                    name: name.clone(),
                    reason: "named twice".into(),
                });
            }
        }
        let named = self.crds.iter().map(|(c, _)| c);
        if let Some(cluster) = named
            .chain(&self.controller_managers)
            .find(|c| !self.clusters.contains(c))
        {
            return Err(Error::UnknownCluster {
                name: cluster.clone(),
                known: self.clusters.join(", "),
            });
        }
        Ok(())
    }

    /// Builds (or finds) the binaries, starts every cluster, waits until each answers an authenticated
    /// `/readyz` (and its controller manager, if it has one, reports its controllers), installs the CRDs,
    /// and writes the kubeconfig.
    pub async fn start(self) -> Result<TestEnv> {
        crate::deadline::arm_test_deadline();
        self.validate()?;
        if let Some(path) = &self.kubeconfig_path {
            // Fail before minutes of work, not after.
            std::fs::write(path, "").map_err(|source| Error::KubeconfigPath {
                path: path.clone(),
                source,
            })?;
        }
        let locate = if self.controller_managers.is_empty() {
            Binaries::locate_or_build
        } else {
            Binaries::locate_or_build_all
        };
        let binaries = tokio::task::spawn_blocking(locate)
            .await
            .map_err(|e| Error::Binaries(format!("build task failed: {e}")))??;
        let mut env = self.empty_env()?;
        for name in &self.clusters {
            let cluster = Cluster::launch(
                name,
                &env.dir.path().join(name),
                &binaries,
                self.audit_log,
                self.controller_managers.contains(name),
            )?;
            env.clusters.push((name.clone(), Mutex::new(cluster)));
        }
        self.finish(env, false).await
    }

    /// An environment with no cluster yet, in a work directory of its own.
    pub(crate) fn empty_env(&self) -> Result<TestEnv> {
        let dir = WorkDir::create()?;
        Ok(TestEnv {
            clusters: Vec::new(),
            kubeconfig: Kubeconfig::default(),
            kubeconfig_path: self
                .kubeconfig_path
                .clone()
                .unwrap_or_else(|| dir.path().join("kubeconfig")),
            dir,
            start_timeout: self.start_timeout.unwrap_or(DEFAULT_START_TIMEOUT),
            namespaces_made: AtomicU64::new(0),
        })
    }

    /// Writes the kubeconfig of `env`'s clusters, waits until each is ready, and installs the CRDs; with
    /// `replace_crds`, a CRD of the same name already there is replaced by the builder's.
    pub(crate) async fn finish(self, mut env: TestEnv, replace_crds: bool) -> Result<TestEnv> {
        env.kubeconfig = env.write_kubeconfig()?;
        let started = Instant::now();
        futures::future::try_join_all(self.clusters.iter().map(|name| env.wait_ready(name)))
            .await?;
        tracing::info!(clusters = self.clusters.len(), elapsed = ?started.elapsed(), "test environment ready");
        for (cluster, crd) in self.crds {
            env.put_crd(&cluster, crd, replace_crds).await?;
        }
        Ok(env)
    }

    /// Whether the environment asks for audit logs.
    pub(crate) fn wants_audit_log(&self) -> bool {
        self.audit_log
    }

    /// The clusters, in the order they were added.
    pub(crate) fn cluster_names(&self) -> &[String] {
        &self.clusters
    }

    /// The clusters that run a controller manager.
    pub(crate) fn controller_manager_clusters(&self) -> &[String] {
        &self.controller_managers
    }
}

impl TestEnv {
    /// A builder with no clusters yet.
    pub fn builder() -> TestEnvBuilder {
        TestEnvBuilder::default()
    }
}
