//! The client pool: one `kube::Client` per context, from the kubeconfig as kubectl finds it.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

// A kubeconfig error's causes carry the file name and the parser's reason.
use super::access::Access;
use super::credential_plugin::DEFAULT_PLUGIN_TIMEOUT;
use super::fence::Fence;
use super::in_cluster::IN_CLUSTER;
use super::no_access::NoAccess;
use super::tls::Tls;
use crate::core::kubeconfig_error;
use crate::core::{Error, Result};

/// Environment variable prefix that remaps a context: `KUBEPLEX_CONTEXT_CLUSTER_A=kind-a` makes the context
/// `cluster-a` use the kubeconfig context `kind-a`.
pub const CONTEXT_ENV_PREFIX: &str = "KUBEPLEX_CONTEXT_";

/// The longest a request waits for its answer (counted from when it was sent).
const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(295);

/// Where the pool's credentials come from.
#[derive(Clone, Debug, Default)]
pub(crate) enum KubeconfigSource {
    /// `KUBECONFIG` (several files merged) or `~/.kube/config`, as kubectl reads it.
    #[default]
    Default,
    /// A kubeconfig given by the program.
    Explicit(Box<Kubeconfig>),
}

/// How contexts map to credentials: the source plus per-context remapping.
#[derive(Clone, Debug, Default)]
pub(crate) struct PoolConfig {
    pub(crate) source: KubeconfigSource,
    /// Logical context name -> kubeconfig context name, or [`IN_CLUSTER`].
    pub(crate) aliases: BTreeMap<String, String>,
    /// In front of every client: with leader election, writes only while the lease is valid.
    pub(crate) fence: Fence,
    /// The `User-Agent` of every request (the API server's audit log names the replica by it).
    pub(crate) user_agent: Option<String>,
    /// How long an exec credential plugin may take to answer (default [`DEFAULT_PLUGIN_TIMEOUT`]).
    pub(crate) plugin_timeout: Option<Duration>,
    /// The contexts whose connections speak HTTP/1.1 only, never offering HTTP/2.
    pub(crate) http1_only: BTreeSet<String>,
    /// The contexts whose connections were said to be insecure: each is said once, not at every build.
    warned: Arc<parking_lot::Mutex<BTreeSet<String>>>,
}

/// One client per context, or why there is none.
pub(crate) struct ClientPool {
    clients: BTreeMap<String, std::result::Result<Client, String>>,
    /// Each client's configuration and credentials, so that the readiness pings (and the leases) can build
    /// clients of their own that share them.
    access: BTreeMap<String, Access>,
}

impl PoolConfig {
    /// The kubeconfig context a logical context uses: an explicit alias, else the environment, else itself.
    pub(crate) fn kubeconfig_context(&self, context: &str) -> String {
        self.kubeconfig_context_in(context, |var| std::env::var(var).ok())
    }

    fn kubeconfig_context_in(&self, context: &str, env: impl Fn(&str) -> Option<String>) -> String {
        if let Some(alias) = self.aliases.get(context) {
            return alias.clone();
        }
        env(&context_env_var(context)).unwrap_or_else(|| context.to_owned())
    }

    /// Where the remapping of `context` came from, as an error names it; empty when it is not remapped.
    fn remapped(&self, context: &str) -> String {
        if self.aliases.contains_key(context) {
            " (remapped by Manager::context_alias)".into()
        } else if std::env::var_os(context_env_var(context)).is_some() {
            format!(" (set by {})", context_env_var(context))
        } else {
            String::new()
        }
    }

    /// Which kubeconfig is read, as an error names it.
    fn kubeconfig_description(&self) -> String {
        match &self.source {
            KubeconfigSource::Explicit(_) => "the kubeconfig given to the manager".into(),
            KubeconfigSource::Default => {
                match std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
                    Some(list) => {
                        let files: Vec<String> = std::env::split_paths(&list)
                            .map(|p| p.display().to_string())
                            .collect();
                        format!("the kubeconfig {} (KUBECONFIG)", files.join(", "))
                    }
                    None => "the kubeconfig ~/.kube/config".into(),
                }
            }
        }
    }

    /// Builds a client for every context; a context that cannot have one is an error naming it.
    ///
    /// A kubeconfig that cannot be read at all fails the whole pool, since no context could work.
    pub(crate) async fn connect(&self, contexts: &[String]) -> Result<(ClientPool, Vec<Error>)> {
        let needs_kubeconfig = contexts
            .iter()
            .any(|c| self.kubeconfig_context(c) != IN_CLUSTER);
        let kubeconfig = if needs_kubeconfig {
            // Reading files blocks: off the async workers, which serve every other context meanwhile.
            let config = self.clone();
            let loaded = tokio::task::spawn_blocking(move || config.load())
                .await
                .map_err(|e| Error::InvalidKubeconfig {
                    reason: format!("reading the kubeconfig stopped: {e}"),
                })??;
            Some(loaded)
        } else {
            None
        };
        // Built concurrently: with many contexts (and exec credential plugins) one by one adds up.
        let built = futures::future::join_all(
            contexts
                .iter()
                .map(|c| self.build_client(c, kubeconfig.as_ref())),
        )
        .await;
        let mut clients = BTreeMap::new();
        let mut access = BTreeMap::new();
        let mut errors = Vec::new();
        for (context, client) in contexts.iter().zip(built) {
            match client {
                Ok((client, reached)) => {
                    clients.insert(context.clone(), Ok(client));
                    access.insert(context.clone(), reached);
                }
                Err(error) => {
                    clients.insert(context.clone(), Err(error.to_string()));
                    errors.push(error);
                }
            }
        }
        Ok((ClientPool { clients, access }, errors))
    }

    fn load(&self) -> Result<Kubeconfig> {
        match &self.source {
            KubeconfigSource::Explicit(kubeconfig) => Ok((**kubeconfig).clone()),
            KubeconfigSource::Default => load_default(
                std::env::var_os("KUBECONFIG"),
                std::env::var_os("HOME").map(PathBuf::from),
            ),
        }
    }

    /// The client of `context` and what it was built from, or why it cannot have one.
    async fn build_client(
        &self,
        context: &str,
        kubeconfig: Option<&Kubeconfig>,
    ) -> Result<(Client, Access)> {
        let kubeconfig_context = self.kubeconfig_context(context);
        let config_error = |reason: String| Error::ClientConfig {
            context: context.to_owned(),
            reason,
        };
        let config = if kubeconfig_context == IN_CLUSTER {
            super::in_cluster::config(|var| std::env::var_os(var))
                .await
                .map_err(|e| config_error(format!("in-cluster configuration: {e}")))?
        } else {
            let kubeconfig = kubeconfig.expect("loaded when a context needs it");
            if !kubeconfig
                .contexts
                .iter()
                .any(|c| c.name == kubeconfig_context)
            {
                let available: Vec<&str> = kubeconfig
                    .contexts
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect();
                return Err(Error::ContextNotFound {
                    context: context.to_owned(),
                    remapped: self.remapped(context),
                    kubeconfig: self.kubeconfig_description(),
                    kubeconfig_context,
                    available: if available.is_empty() {
                        "none".into()
                    } else {
                        available.join(", ")
                    },
                });
            }
            let only = only_context(kubeconfig, &kubeconfig_context);
            let options = KubeConfigOptions {
                context: Some(kubeconfig_context),
                ..KubeConfigOptions::default()
            };
            let from = self.kubeconfig_description();
            let config = kube::Config::from_custom_kubeconfig(only, &options)
                .await
                .map_err(|e| config_error(format!("{from}: {}", kubeconfig_error(&e))))?;
            // Its credentials are decoded when the client is built: a broken one names the file too.
            return self
                .finish(context, config)
                .await
                .map_err(|error| match error {
                    Error::ClientConfig { context, reason } => Error::ClientConfig {
                        context,
                        reason: format!("{from}: {reason}"),
                    },
                    other => other,
                });
        };
        self.finish(context, config).await
    }

    /// A client for `context` from its configuration, as every client of the pool is built: with a read
    /// timeout, the replica's `User-Agent`, and its writes behind the fence down to the socket. Members'
    /// clients are built here too. Its credentials (an exec plugin's token) are read now, and shared with
    /// the clients built from the [`Access`] returned.
    pub(crate) async fn finish(
        &self,
        context: &str,
        config: kube::Config,
    ) -> Result<(Client, Access)> {
        self.build(context, config)
            .await
            .map_err(|failed| Error::ClientConfig {
                context: context.to_owned(),
                reason: failed.reason,
            })
    }

    /// As [`finish`](Self::finish), saying whether the failure may pass by itself (an exec plugin that
    /// failed) or lasts until the configuration changes.
    pub(crate) async fn build(
        &self,
        context: &str,
        mut config: kube::Config,
    ) -> std::result::Result<(Client, Access), NoAccess> {
        // kube sets no read timeout: a request to a server that stopped answering without closing the
        // connection (frozen, black-holed) would wait for ever, holding its key and a worker. 295 s is
        // above the watches' 290 s, which the server ends itself, so no working watch is cut.
        if config.read_timeout.is_none() {
            config.read_timeout = Some(READ_TIMEOUT);
            config.reset_reader_on_write = true;
        }
        // Always one, so that an audit log tells this operator's requests from another's.
        let agent = self.user_agent.clone().unwrap_or_else(default_user_agent);
        if let Ok(value) = hyper::http::HeaderValue::from_str(&agent) {
            config
                .headers
                .push((hyper::http::header::USER_AGENT, value));
        }
        let timeout = self.plugin_timeout.unwrap_or(DEFAULT_PLUGIN_TIMEOUT);
        let mut access = Access::of(context, config, timeout).await?;
        if self.http1_only.contains(context) {
            access.tls = Arc::new(access.tls.http1_only());
        }
        let client = super::transport::client(&access, &self.fence)?;
        if let Some(insecurity) = Tls::insecurity(access.config())
            && self.warned.lock().insert(context.to_owned())
        {
            tracing::warn!(cluster = %context, %insecurity, "the cluster's connections are not secure");
        }
        Ok((client, access))
    }
}

/// The `User-Agent` of a replica without leader election: `kubeplex/<version> (<pod or host name>)`, the
/// name from `POD_NAME`, else `HOSTNAME`, else `/etc/hostname`.
pub(crate) fn default_user_agent() -> String {
    let named = |name: Option<String>| name.map(|n| n.trim().to_owned()).filter(|n| !n.is_empty());
    let name = named(std::env::var("POD_NAME").ok())
        .or_else(|| named(std::env::var("HOSTNAME").ok()))
        .or_else(|| named(std::fs::read_to_string("/etc/hostname").ok()))
        .unwrap_or_else(|| "unknown host".to_owned());
    let name: String = name
        .chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .collect();
    format!("kubeplex/{} ({name})", env!("CARGO_PKG_VERSION"))
}

impl ClientPool {
    /// The client of `context`, or why it has none.
    pub(crate) fn client(&self, context: &str) -> Result<Client> {
        match self.clients.get(context) {
            Some(Ok(client)) => Ok(client.clone()),
            Some(Err(reason)) => Err(Error::ClientConfig {
                context: context.to_owned(),
                reason: reason.clone(),
            }),
            None => Err(Error::UndeclaredContext {
                context: context.to_owned(),
            }),
        }
    }

    /// A pool of ready-made clients (tests use clients answered by a stand-in server).
    #[cfg(test)]
    pub(crate) fn from_clients(clients: impl IntoIterator<Item = (&'static str, Client)>) -> Self {
        Self {
            clients: clients
                .into_iter()
                .map(|(context, client)| (context.to_owned(), Ok(client)))
                .collect(),
            access: BTreeMap::new(),
        }
    }

    /// When the server of `context` last answered one of its clients, if it is a context that has.
    pub(crate) fn last_answer(&self, context: &str) -> Option<tokio::time::Instant> {
        self.access.get(context).and_then(Access::last_answer)
    }

    /// The configuration and credentials of every context that has a client.
    pub(crate) fn access(&self) -> impl Iterator<Item = (&str, &Access)> {
        self.access
            .iter()
            .map(|(context, access)| (context.as_str(), access))
    }
}

/// Reads the kubeconfig as kubectl does: every file of `KUBECONFIG` (a path list) merged, the first
/// definition of a name winning; else `~/.kube/config`. Each error names the file.
fn load_default(kubeconfig_var: Option<OsString>, home: Option<PathBuf>) -> Result<Kubeconfig> {
    let paths: Vec<PathBuf> = match kubeconfig_var.filter(|v| !v.is_empty()) {
        Some(list) => std::env::split_paths(&list)
            .filter(|p| !p.as_os_str().is_empty())
            .collect(),
        None => {
            let Some(default) = home.map(|home| home.join(".kube").join("config")) else {
                return Err(Error::NoKubeconfig {
                    reason: "KUBECONFIG and HOME are not set".into(),
                });
            };
            if !default.exists() {
                return Err(Error::NoKubeconfig {
                    reason: format!(
                        "KUBECONFIG is not set and {} does not exist",
                        default.display()
                    ),
                });
            }
            vec![default]
        }
    };
    let mut merged: Option<Kubeconfig> = None;
    for path in &paths {
        let invalid = |error: &kube::config::KubeconfigError| Error::InvalidKubeconfig {
            reason: format!("{}: {}", path.display(), kubeconfig_error(error)),
        };
        let next = Kubeconfig::read_from(path).map_err(|e| invalid(&e))?;
        merged = Some(match merged {
            Some(config) => config.merge(next).map_err(|e| invalid(&e))?,
            None => next,
        });
    }
    merged.ok_or_else(|| Error::NoKubeconfig {
        reason: "KUBECONFIG names no file".into(),
    })
}

/// The part of `kubeconfig` one context needs: the context, its cluster and its user. A fleet's kubeconfig
/// holds every cluster's CA and credentials; each client needs only its own.
pub(crate) fn only_context(kubeconfig: &Kubeconfig, context: &str) -> Kubeconfig {
    let named = kubeconfig.contexts.iter().find(|c| c.name == context);
    let target = named.and_then(|c| c.context.as_ref());
    Kubeconfig {
        contexts: named.cloned().into_iter().collect(),
        clusters: kubeconfig
            .clusters
            .iter()
            .filter(|c| target.is_some_and(|t| t.cluster == c.name))
            .cloned()
            .collect(),
        auth_infos: kubeconfig
            .auth_infos
            .iter()
            .filter(|a| target.is_some_and(|t| t.user.as_deref() == Some(a.name.as_str())))
            .cloned()
            .collect(),
        current_context: Some(context.to_owned()),
        preferences: kubeconfig.preferences.clone(),
        kind: kubeconfig.kind.clone(),
        api_version: kubeconfig.api_version.clone(),
        ..Kubeconfig::default()
    }
}

/// The environment variable that remaps `context`: `cluster-a` -> `KUBEPLEX_CONTEXT_CLUSTER_A`.
fn context_env_var(context: &str) -> String {
    format!(
        "{CONTEXT_ENV_PREFIX}{}",
        context.to_uppercase().replace(['-', '.'], "_")
    )
}

#[cfg(test)]
mod tests;
