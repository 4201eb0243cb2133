//! The environment: several clusters, their kubeconfig, and the controls tests use on them.

use std::fmt;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use parking_lot::{Mutex, MutexGuard};

use crate::control_plane::{Cluster, WorkDir};
use crate::error::{Error, Result};
use crate::kubeconfig::{self, ClusterEntry, Credential};
use crate::relay::Relay;

/// How long `start` waits for every cluster by default; upstream's envtest needed 60 s under CI contention.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(90);

/// How many names [`TestEnv::create_namespace`] tries before it gives up.
const NAMESPACE_TRIES: u32 = 1000;

/// Several real Kubernetes API servers on this machine, each with its own etcd, certificates and context.
///
/// Dropping it kills every process and removes its files; so does the end of the program when it lives in
/// a static (see [`SharedTestEnv`](crate::SharedTestEnv)).
pub struct TestEnv {
    pub(crate) clusters: Vec<(String, Mutex<Cluster>)>,
    pub(crate) kubeconfig: Kubeconfig,
    pub(crate) kubeconfig_path: PathBuf,
    pub(crate) dir: WorkDir,
    pub(crate) start_timeout: Duration,
    pub(crate) namespaces_made: AtomicU64,
}

impl TestEnv {
    /// The clusters' names, in the order they were added.
    pub fn cluster_names(&self) -> impl Iterator<Item = &str> {
        self.clusters.iter().map(|(name, _)| name.as_str())
    }

    /// The kubeconfig: one context per cluster, named as the cluster, with admin credentials.
    pub fn kubeconfig(&self) -> &Kubeconfig {
        &self.kubeconfig
    }

    /// Where [`TestEnv::kubeconfig`] is written (use it as `KUBECONFIG`).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// The same kubeconfig, except that the context of `cluster` carries `credential`.
    pub fn kubeconfig_with(&self, cluster: &str, credential: Credential) -> Result<Kubeconfig> {
        drop(self.lock(cluster)?);
        Ok(self
            .build_kubeconfig(|name| {
                if name == cluster {
                    credential
                } else {
                    Credential::Admin
                }
            })
            .0)
    }

    /// The API server's address, e.g. `https://127.0.0.1:34567`; it keeps its port across stop and start.
    pub fn server_url(&self, cluster: &str) -> Result<String> {
        Ok(self.lock(cluster)?.server_url())
    }

    /// A client for `cluster` with admin credentials.
    ///
    /// Each call builds a new client, so a client never outlives the async runtime it was made in.
    pub async fn client(&self, cluster: &str) -> Result<Client> {
        self.client_as(cluster, Credential::Admin).await
    }

    /// A client for `cluster` with the given credentials.
    pub async fn client_as(&self, cluster: &str, credential: Credential) -> Result<Client> {
        client_for(self.kubeconfig_with(cluster, credential)?, cluster).await
    }

    /// Kills the cluster's API server (and its controller manager, if it runs one): requests fail with
    /// "connection refused". Its etcd keeps the data.
    pub fn stop(&self, cluster: &str) -> Result<()> {
        self.lock(cluster)?.stop_apiserver()
    }

    /// Starts a stopped API server on the same port and waits until it is ready (then starts its controller
    /// manager, if it runs one, and waits for that too); earlier data is still there.
    pub async fn start(&self, cluster: &str) -> Result<()> {
        self.lock(cluster)?.start_apiserver()?;
        self.wait_ready(cluster).await
    }

    /// Replaces the cluster by another at the same address: its API server is stopped and started again
    /// over an empty store, with the same certificates and credentials (as a cluster rebuilt with the same
    /// PKI). Its `kube-system` Namespace has a new UID, and nothing written before is there.
    pub async fn replace(&self, cluster: &str) -> Result<()> {
        {
            let mut running = self.lock(cluster)?;
            running.stop_apiserver()?;
            running.empty_store()?;
            running.start_apiserver()?;
        }
        self.wait_ready(cluster).await
    }

    /// Suspends the cluster's API server (SIGSTOP): connections open but nothing answers, as in a partition.
    pub fn freeze(&self, cluster: &str) -> Result<()> {
        self.lock(cluster)?.set_frozen(true)
    }

    /// Resumes a frozen API server (SIGCONT).
    pub fn thaw(&self, cluster: &str) -> Result<()> {
        self.lock(cluster)?.set_frozen(false)
    }

    /// Whether the cluster's API server is frozen.
    pub fn is_frozen(&self, cluster: &str) -> Result<bool> {
        Ok(self.lock(cluster)?.is_frozen())
    }

    /// A [`Relay`] in front of the cluster's API server, open: the test takes the server away from those
    /// it routes through the relay alone, while everyone else goes on using it.
    pub async fn relay(&self, cluster: &str) -> Result<Relay> {
        let port = self.lock(cluster)?.apiserver_port();
        Relay::start(cluster, (Ipv4Addr::LOCALHOST, port).into())
    }

    /// The kubeconfig with the relay's cluster behind `relay`, written in the environment's directory (as
    /// the `KUBECONFIG` of a program under test); for a kubeconfig of your own, [`Relay::route`].
    pub fn kubeconfig_path_via(&self, relay: &Relay) -> Result<PathBuf> {
        let mut kubeconfig = self.kubeconfig.clone();
        relay.route(&mut kubeconfig)?;
        let file = format!(
            "kubeconfig-{}-via-{}",
            relay.cluster,
            relay.address().port()
        );
        let path = self.dir.path().join(file);
        let text = serde_json::to_string_pretty(&kubeconfig).expect("a kubeconfig serializes");
        std::fs::write(&path, text).map_err(|source| Error::KubeconfigPath {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    /// Process ids of every running kube-apiserver, etcd and kube-controller-manager.
    pub fn pids(&self) -> Vec<u32> {
        self.clusters
            .iter()
            .flat_map(|(_, c)| c.lock().pids())
            .collect()
    }

    /// Creates a namespace named `prefix-N` in each named cluster, N the first number this environment has
    /// not used whose name no program took in any of them, so that tests sharing clusters do not see each
    /// other's objects. Returns the name.
    pub async fn create_namespace(&self, clusters: &[&str], prefix: &str) -> Result<String> {
        // Bounded: each try takes a new number, and only names another program made are passed over.
        for _ in 0..NAMESPACE_TRIES {
            let n = self.namespaces_made.fetch_add(1, Ordering::Relaxed);
            let name = format!("{prefix}-{n}");
            match self.create_namespace_named(clusters, &name).await {
                Err(Error::Kube {
                    source: kube::Error::Api(status),
                    ..
                }) if status.code == 409 => continue,
                other => return other.map(|()| name),
            }
        }
        Err(Error::Io {
            what: format!("creating a namespace {prefix}-N"),
            source: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("{NAMESPACE_TRIES} names in a row were taken"),
            ),
        })
    }

    async fn create_namespace_named(&self, clusters: &[&str], name: &str) -> Result<()> {
        for &cluster in clusters {
            let api: Api<Namespace> = Api::all(self.client(cluster).await?);
            let namespace = Namespace {
                metadata: ObjectMeta {
                    name: Some(name.to_owned()),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            };
            api.create(&PostParams::default(), &namespace)
                .await
                .map_err(|source| Error::Kube {
                    cluster: cluster.to_owned(),
                    source,
                })?;
        }
        Ok(())
    }

    /// Installs `crd` in `cluster` and waits until it is established and its resource is served; a CRD of
    /// the same name already there is left as it is.
    pub async fn install_crd(&self, cluster: &str, crd: CustomResourceDefinition) -> Result<()> {
        self.put_crd(cluster, crd, false).await
    }

    /// [`TestEnv::install_crd`]; with `replace`, a CRD of the same name already there is replaced by `crd`.
    pub(crate) async fn put_crd(
        &self,
        cluster: &str,
        mut crd: CustomResourceDefinition,
        replace: bool,
    ) -> Result<()> {
        let kube_error = |source| Error::Kube {
            cluster: cluster.to_owned(),
            source,
        };
        let client = self.client(cluster).await?;
        let api: Api<CustomResourceDefinition> = Api::all(client);
        let name = crd.metadata.name.clone().unwrap_or_default();
        match api.create(&PostParams::default(), &crd).await {
            Err(kube::Error::Api(status)) if status.code == 409 && replace => {
                // Another program sharing the cluster may replace it between the read and the write: read
                // again and write again (its conflict says so).
                let mut attempts = 0;
                loop {
                    let current = api.get(&name).await.map_err(kube_error)?;
                    crd.metadata.resource_version = current.metadata.resource_version;
                    match api.replace(&name, &PostParams::default(), &crd).await {
                        Err(kube::Error::Api(status)) if status.code == 409 && attempts < 10 => {
                            attempts += 1;
                        }
                        other => break other.map(drop).map_err(kube_error)?,
                    }
                }
            }
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            other => {
                other.map_err(kube_error)?;
            }
        }
        let started = Instant::now();
        while started.elapsed() < self.start_timeout {
            let current = api.get(&name).await.map_err(kube_error)?;
            let established = current
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(Error::CrdNotEstablished {
            cluster: cluster.to_owned(),
            crd: name,
            waited: self.start_timeout,
        })
    }

    pub(crate) fn write_kubeconfig(&self) -> Result<Kubeconfig> {
        let (kubeconfig, document) = self.build_kubeconfig(|_| Credential::Admin);
        let text = serde_json::to_string_pretty(&document).expect("JSON values serialize");
        let path = &self.kubeconfig_path;
        std::fs::write(path, text).map_err(|source| Error::KubeconfigPath {
            path: path.clone(),
            source,
        })?;
        Ok(kubeconfig)
    }

    fn build_kubeconfig(
        &self,
        credential: impl Fn(&str) -> Credential,
    ) -> (Kubeconfig, serde_json::Value) {
        let guards: Vec<_> = self
            .clusters
            .iter()
            .map(|(name, c)| (name, c.lock()))
            .collect();
        let entries: Vec<ClusterEntry<'_>> = guards
            .iter()
            .map(|(name, cluster)| ClusterEntry {
                name,
                server: cluster.server_url(),
                pki: &cluster.pki,
                credential: credential(name),
            })
            .collect();
        kubeconfig::build(&entries)
    }

    pub(crate) fn lock(&self, cluster: &str) -> Result<MutexGuard<'_, Cluster>> {
        self.clusters
            .iter()
            .find(|(name, _)| name == cluster)
            .map(|(_, c)| c.lock())
            .ok_or_else(|| Error::UnknownCluster {
                name: cluster.to_owned(),
                known: self.cluster_names().collect::<Vec<_>>().join(", "),
            })
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        // Processes first: they hold files open in the directory, which goes when `dir` is dropped.
        self.clusters.clear();
    }
}

impl fmt::Debug for TestEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestEnv")
            .field("clusters", &self.cluster_names().collect::<Vec<_>>())
            .field("kubeconfig_path", &self.kubeconfig_path)
            .finish_non_exhaustive()
    }
}

/// A client for the context `cluster` of `kubeconfig`.
pub(crate) async fn client_for(kubeconfig: Kubeconfig, cluster: &str) -> Result<Client> {
    let options = KubeConfigOptions {
        context: Some(cluster.to_owned()),
        ..KubeConfigOptions::default()
    };
    let config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|source| Error::Kubeconfig {
            cluster: cluster.to_owned(),
            source,
        })?;
    Client::try_from(config).map_err(|source| Error::Kube {
        cluster: cluster.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_rejects_bad_configurations() {
        assert!(matches!(
            TestEnv::builder().validate(),
            Err(Error::NoClusters)
        ));
        let upper = TestEnv::builder().cluster("Cluster").validate();
        let why = kubeplex_names::dns_label("Cluster").unwrap_err();
        assert!(
            matches!(&upper, Err(Error::InvalidClusterName { reason, .. }) if *reason == why),
            "{upper:?}"
        );
        let twice = TestEnv::builder().clusters(["a", "b", "a"]).validate();
        assert!(
            matches!(&twice, Err(Error::InvalidClusterName { reason, .. }) if reason == "named twice"),
            "{twice:?}"
        );
        let crd_elsewhere = TestEnv::builder()
            .cluster("a")
            .crd("b", CustomResourceDefinition::default())
            .validate();
        assert!(
            matches!(crd_elsewhere, Err(Error::UnknownCluster { .. })),
            "{crd_elsewhere:?}"
        );
        assert!(
            TestEnv::builder()
                .clusters(["control", "cluster-a"])
                .validate()
                .is_ok()
        );
    }
}
