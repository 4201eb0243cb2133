//! The client pool: one `kube::Client` per context, from the kubeconfig as kubectl finds it.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

// A kubeconfig error's causes carry the file name and the parser's reason.
use crate::error::{Error, Result, chain};
use crate::redact::kubeconfig_error;

/// Environment variable prefix that remaps a context: `KUBEPLEX_CONTEXT_CLUSTER_A=kind-a` makes the context
/// `cluster-a` use the kubeconfig context `kind-a`.
pub const CONTEXT_ENV_PREFIX: &str = "KUBEPLEX_CONTEXT_";

/// The kubeconfig context name meaning "the in-cluster service account" in aliases and the environment.
pub const IN_CLUSTER: &str = "in-cluster";

/// Environment variable naming the directory the in-cluster context reads the service account's `token`,
/// `ca.crt` and `namespace` from, instead of [`SERVICE_ACCOUNT_DIR`]; the API server is still
/// `KUBERNETES_SERVICE_HOST`:`KUBERNETES_SERVICE_PORT`. Tests use it to run the in-cluster path against a
/// cluster of their own; a Pod needs neither.
pub const SERVICE_ACCOUNT_DIR_ENV: &str = "KUBEPLEX_SERVICE_ACCOUNT_DIR";

/// Where Kubernetes mounts a Pod's service-account token, CA certificate and namespace.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

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
}

/// One client per context, or why there is none.
pub(crate) struct ClientPool {
    clients: BTreeMap<String, std::result::Result<Client, String>>,
    /// Each client's configuration, so that the health pings can build clients of their own.
    configs: BTreeMap<String, kube::Config>,
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
        let built =
            futures::future::join_all(contexts.iter().map(|c| self.client(c, kubeconfig.as_ref())))
                .await;
        let mut clients = BTreeMap::new();
        let mut configs = BTreeMap::new();
        let mut errors = Vec::new();
        for (context, client) in contexts.iter().zip(built) {
            match client {
                Ok((client, config)) => {
                    clients.insert(context.clone(), Ok(client));
                    configs.insert(context.clone(), config);
                }
                Err(error) => {
                    clients.insert(context.clone(), Err(error.to_string()));
                    errors.push(error);
                }
            }
        }
        Ok((ClientPool { clients, configs }, errors))
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

    async fn client(
        &self,
        context: &str,
        kubeconfig: Option<&Kubeconfig>,
    ) -> Result<(Client, kube::Config)> {
        let kubeconfig_context = self.kubeconfig_context(context);
        let config_error = |reason: String| Error::ClientConfig {
            context: context.to_owned(),
            reason,
        };
        let config = if kubeconfig_context == IN_CLUSTER {
            in_cluster_config(|var| std::env::var_os(var))
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
            kube::Config::from_custom_kubeconfig(only, &options)
                .await
                .map_err(|e| config_error(kubeconfig_error(&e)))?
        };
        let client = Client::try_from(config.clone()).map_err(|e| config_error(chain(&e)))?;
        Ok((client, config))
    }
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
            configs: BTreeMap::new(),
        }
    }

    /// The configuration of every context that has a client.
    pub(crate) fn configs(&self) -> impl Iterator<Item = (&str, &kube::Config)> {
        self.configs
            .iter()
            .map(|(context, config)| (context.as_str(), config))
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
fn only_context(kubeconfig: &Kubeconfig, context: &str) -> Kubeconfig {
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

/// The in-cluster configuration, as kube's `Config::incluster` builds it (the token file re-read as it
/// rotates, the CA file watched), from the directory [`SERVICE_ACCOUNT_DIR_ENV`] names, else the Pod's
/// mount. `env` reads the environment; each error names the variable or file.
async fn in_cluster_config(
    env: impl Fn(&str) -> Option<OsString>,
) -> std::result::Result<kube::Config, String> {
    let var = |name: &str| {
        env(name)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("{name} is not set (is this process running in a Pod?)"))?
            .into_string()
            .map_err(|_| format!("{name} is not valid UTF-8"))
    };
    let host = var("KUBERNETES_SERVICE_HOST")?;
    let port: u16 = var("KUBERNETES_SERVICE_PORT")?
        .parse()
        .map_err(|e| format!("KUBERNETES_SERVICE_PORT: {e}"))?;
    // An IPv6 address is bracketed in a URL.
    let server = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => format!("https://{}", std::net::SocketAddr::new(ip, port)),
        Err(_) => format!("https://{host}:{port}"),
    };

    let dir = env(SERVICE_ACCOUNT_DIR_ENV)
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(SERVICE_ACCOUNT_DIR), PathBuf::from);
    let file = |name: &str| -> std::result::Result<(PathBuf, String), String> {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        Ok((path, text))
    };
    let (ca, _) = file("ca.crt")?;
    let (token, _) = file("token")?;
    let (_, namespace) = file("namespace")?;
    let path_str = |path: &PathBuf| {
        path.to_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("{} is not valid UTF-8", path.display()))
    };
    // kube reads the CA and (again as it rotates) the token from these files.
    let document = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": IN_CLUSTER, "cluster": { "server": server, "certificate-authority": path_str(&ca)? } }],
        "users": [{ "name": IN_CLUSTER, "user": { "tokenFile": path_str(&token)? } }],
        "contexts": [{ "name": IN_CLUSTER, "context": { "cluster": IN_CLUSTER, "user": IN_CLUSTER } }],
        "current-context": IN_CLUSTER,
    });
    let kubeconfig: Kubeconfig = serde_json::from_value(document)
        .map_err(|e| format!("{server} with the files of {}: {e}", dir.display()))?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| format!("{}: {}", dir.display(), kubeconfig_error(&e)))?;
    config.default_namespace = namespace.trim().to_owned();
    config.root_cert_file = Some(ca);
    Ok(config)
}

/// The environment variable that remaps `context`: `cluster-a` -> `KUBEPLEX_CONTEXT_CLUSTER_A`.
fn context_env_var(context: &str) -> String {
    format!(
        "{CONTEXT_ENV_PREFIX}{}",
        context.to_uppercase().replace(['-', '.'], "_")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig_json(contexts: &[&str]) -> serde_json::Value {
        let contexts: Vec<serde_json::Value> = contexts
            .iter()
            .map(|name| serde_json::json!({ "name": name, "context": { "cluster": name, "user": name } }))
            .collect();
        serde_json::json!({ "apiVersion": "v1", "kind": "Config", "contexts": contexts })
    }

    fn kubeconfig(contexts: &[&str]) -> Kubeconfig {
        serde_json::from_value(kubeconfig_json(contexts)).unwrap()
    }

    #[test]
    fn a_context_maps_to_an_alias_else_the_environment_else_itself() {
        let mut config = PoolConfig::default();
        config
            .aliases
            .insert("control".into(), "kind-control".into());
        let env = |var: &str| (var == "KUBEPLEX_CONTEXT_CLUSTER_A").then(|| "prod-eu-1".to_owned());
        assert_eq!(config.kubeconfig_context_in("control", env), "kind-control");
        assert_eq!(config.kubeconfig_context_in("cluster-a", env), "prod-eu-1");
        assert_eq!(config.kubeconfig_context_in("cluster-b", env), "cluster-b");
        assert_eq!(
            context_env_var("eu.cluster-b"),
            "KUBEPLEX_CONTEXT_EU_CLUSTER_B"
        );
    }

    #[test]
    fn kubeconfig_errors_name_the_file_and_the_cause() {
        let dir = tempfile::tempdir().unwrap();
        let none = load_default(None, Some(dir.path().to_owned()))
            .unwrap_err()
            .to_string();
        assert!(
            none.starts_with("no kubeconfig: KUBECONFIG is not set and")
                && none.contains(".kube/config"),
            "{none}"
        );

        let broken = dir.path().join("broken");
        std::fs::write(&broken, "clusters: [this is: not: valid").unwrap();
        let good = dir.path().join("good");
        std::fs::write(
            &good,
            serde_json::to_string(&kubeconfig_json(&["control"])).unwrap(),
        )
        .unwrap();
        let list = std::env::join_paths([&good, &broken]).unwrap();
        let invalid = load_default(Some(list), None).unwrap_err().to_string();
        assert!(
            invalid.starts_with(&format!("invalid kubeconfig: {}: ", broken.display())),
            "{invalid}"
        );

        let missing = dir.path().join("missing");
        let unreadable = load_default(Some(missing.clone().into_os_string()), None)
            .unwrap_err()
            .to_string();
        assert!(
            unreadable.contains(&missing.display().to_string()),
            "{unreadable}"
        );
    }

    #[test]
    fn kubeconfig_files_are_merged_like_kubectl_does() {
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = (dir.path().join("first"), dir.path().join("second"));
        std::fs::write(
            &first,
            serde_json::to_string(&kubeconfig_json(&["control"])).unwrap(),
        )
        .unwrap();
        std::fs::write(
            &second,
            serde_json::to_string(&kubeconfig_json(&["cluster-a", "control"])).unwrap(),
        )
        .unwrap();
        let merged =
            load_default(Some(std::env::join_paths([&first, &second]).unwrap()), None).unwrap();
        let names: Vec<&str> = merged.contexts.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["control", "cluster-a"]);
    }

    #[test]
    fn each_client_gets_only_its_own_cluster_and_user() {
        let mut full: serde_json::Value = kubeconfig_json(&["control", "cluster-a", "cluster-b"]);
        full["clusters"] = serde_json::json!(["control", "cluster-a", "cluster-b"].map(
            |n| serde_json::json!({ "name": n, "cluster": { "server": format!("https://{n}") } })
        ));
        full["users"] =
            serde_json::json!(["control", "cluster-a", "cluster-b"].map(
                |n| serde_json::json!({ "name": n, "user": { "token": format!("secret-{n}") } })
            ));
        let full: Kubeconfig = serde_json::from_value(full).unwrap();
        let one = only_context(&full, "cluster-a");
        let names = |v: Vec<&str>| v.join(",");
        assert_eq!(
            names(one.contexts.iter().map(|c| c.name.as_str()).collect()),
            "cluster-a"
        );
        assert_eq!(
            names(one.clusters.iter().map(|c| c.name.as_str()).collect()),
            "cluster-a"
        );
        assert_eq!(
            names(one.auth_infos.iter().map(|c| c.name.as_str()).collect()),
            "cluster-a"
        );
        assert_eq!(one.current_context.as_deref(), Some("cluster-a"));
    }

    #[tokio::test]
    async fn the_in_cluster_configuration_reads_the_directory_the_environment_names() {
        let dir = tempfile::tempdir().unwrap();
        let vars = |port: &'static str| {
            let dir = dir.path().as_os_str().to_owned();
            move |var: &str| match var {
                SERVICE_ACCOUNT_DIR_ENV => Some(dir.clone()),
                "KUBERNETES_SERVICE_HOST" => Some("10.0.0.1".into()),
                "KUBERNETES_SERVICE_PORT" => Some(port.into()),
                _ => None,
            }
        };
        let missing = in_cluster_config(vars("6443")).await.unwrap_err();
        let ca = dir.path().join("ca.crt");
        assert!(
            missing.starts_with(&format!("reading {}: ", ca.display())),
            "{missing}"
        );
        // kube decodes the PEM here; whether it holds a valid certificate is the TLS handshake's business.
        std::fs::write(
            &ca,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("token"), "secret-token").unwrap();
        std::fs::write(dir.path().join("namespace"), "kubeplex-system\n").unwrap();

        let config = in_cluster_config(vars("6443")).await.unwrap();
        assert_eq!(config.cluster_url.to_string(), "https://10.0.0.1:6443/");
        assert_eq!(config.default_namespace, "kubeplex-system");
        assert_eq!(config.root_cert_file.as_deref(), Some(ca.as_path()));
        assert_eq!(config.root_cert.map(|c| c.len()), Some(1));
        assert_eq!(
            config.auth_info.token_file.as_deref(),
            dir.path().join("token").to_str(),
            "the token is read from its file (and re-read as it rotates), not copied"
        );

        let bad_port = in_cluster_config(vars("https")).await.unwrap_err();
        assert!(
            bad_port.starts_with("KUBERNETES_SERVICE_PORT: "),
            "{bad_port}"
        );
        let no_host = in_cluster_config(|_| None).await.unwrap_err();
        assert_eq!(
            no_host,
            "KUBERNETES_SERVICE_HOST is not set (is this process running in a Pod?)"
        );
        let ipv6 = |var: &str| match var {
            "KUBERNETES_SERVICE_HOST" => Some("fd00::1".into()),
            "KUBERNETES_SERVICE_PORT" => Some("443".into()),
            other => vars("443")(other),
        };
        let config = in_cluster_config(ipv6).await.unwrap();
        assert_eq!(config.cluster_url.to_string(), "https://[fd00::1]:443/");
    }

    #[tokio::test]
    async fn a_missing_context_is_named_with_the_ones_the_kubeconfig_has() {
        let config = PoolConfig {
            source: KubeconfigSource::Explicit(Box::new(kubeconfig(&["control", "cluster-a"]))),
            aliases: [("cluster-b".to_owned(), "kind-b".to_owned())].into(),
        };
        let (pool, errors) = config.connect(&["cluster-b".to_owned()]).await.unwrap();
        let message = errors[0].to_string();
        assert_eq!(
            message,
            "context cluster-b: the kubeconfig given to the manager has no context \"kind-b\" \
             (remapped by Manager::context_alias) (it has: control, cluster-a)"
        );
        assert!(pool.client("cluster-b").is_err());
        assert!(matches!(
            pool.client("elsewhere"),
            Err(Error::UndeclaredContext { .. })
        ));
    }
}
