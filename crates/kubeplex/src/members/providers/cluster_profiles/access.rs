//! The consumer's access-providers file (sig-multicluster's Cluster Inventory API, KEP-5339): which exec
//! credential plugin reaches a cluster offered by which access provider, and the kubeconfig that results
//! for one ClusterProfile. kube runs the plugin; nothing here runs one.

use std::collections::BTreeMap;
use std::path::Path;

use kube::config::{
    AuthInfo, Cluster, Context, ExecConfig, ExecInteractiveMode, Kubeconfig, NamedAuthInfo,
    NamedCluster, NamedContext,
};
use serde::Deserialize;

use super::profile::Offered;
use crate::members::KubeconfigAllowlist;

/// The cluster extension of extra plugin arguments a ClusterProfile may carry (a JSON list of strings).
pub(super) const ADDITIONAL_ARGS: &str =
    "clusterprofiles.multicluster.x-k8s.io/exec/additional-args";
/// The cluster extension of extra plugin environment variables (a JSON object of strings).
pub(super) const ADDITIONAL_ENVS: &str =
    "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs";

/// The exec credential plugins a consumer knows, by access provider name, in its order of preference: the
/// access-providers file of sig-multicluster's Cluster Inventory API.
///
/// ```json
/// { "providers": [
///     { "name": "secretreader",
///       "execConfig": { "apiVersion": "client.authentication.k8s.io/v1", "command": "/plugins/secretreader",
///                       "args": ["--verbose"], "provideClusterInfo": true },
///       "profileSourcedCLIArgsPolicy": "Append",
///       "profileSourcedEnvVarsPolicy": "AppendIfNotExists" } ] }
/// ```
///
/// The first provider in the file's order that a ClusterProfile also offers is used. The plugin always
/// runs with `interactiveMode: Never`. With `provideClusterInfo` the plugin is given the cluster (its
/// `ExecCredential.spec.cluster`), with the `client.authentication.k8s.io/exec` extension of the
/// profile's cluster as `spec.cluster.config`. The profile's
/// `clusterprofiles.multicluster.x-k8s.io/exec/additional-args` and `…/additional-envs` extensions change
/// the plugin's command line only where the file's policies allow it (by default they are ignored: a
/// ClusterProfile is written by the cluster manager, the command runs in the consumer's process):
/// `profileSourcedCLIArgsPolicy` `Append` adds the profile's arguments after the file's;
/// `profileSourcedEnvVarsPolicy` `AppendIfNotExists` adds the profile's variables the file does not set,
/// `Replace` lets the profile's win.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct AccessProviders {
    providers: Vec<AccessProvider>,
}

/// One provider of the file.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AccessProvider {
    name: String,
    exec_config: ExecConfig,
    #[serde(default, rename = "profileSourcedCLIArgsPolicy")]
    args_policy: ArgsPolicy,
    #[serde(default)]
    profile_sourced_env_vars_policy: EnvsPolicy,
}

/// What a profile's extra arguments do.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
enum ArgsPolicy {
    #[default]
    Ignore,
    Append,
}

/// What a profile's extra environment variables do.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
enum EnvsPolicy {
    #[default]
    Ignore,
    AppendIfNotExists,
    Replace,
}

/// The access-providers file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum AccessProvidersError {
    /// The file could not be read.
    #[error("reading the access-providers file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The text is not an access-providers file (the reason names the place, not the text).
    #[error("not an access-providers file: {0}")]
    Parse(String),
}

impl AccessProviders {
    /// The providers in `json`, an access-providers file's text.
    pub fn from_json(json: &str) -> Result<Self, AccessProvidersError> {
        let providers: Self = serde_json::from_str(json).map_err(|e| {
            // serde_json's message may quote a value (a token in an env var): only where it failed.
            AccessProvidersError::Parse(format!(
                "{:?} error at line {}, column {}",
                e.classify(),
                e.line(),
                e.column()
            ))
        })?;
        for provider in &providers.providers {
            if provider
                .exec_config
                .command
                .as_deref()
                .is_none_or(str::is_empty)
            {
                let name = &provider.name;
                return Err(AccessProvidersError::Parse(format!(
                    "provider {name}'s execConfig has no command"
                )));
            }
        }
        Ok(providers)
    }

    /// The providers in the file at `path`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, AccessProvidersError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| AccessProvidersError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_json(&text)
    }

    /// The providers' names, in the file's order.
    pub fn names(&self) -> Vec<&str> {
        self.providers.iter().map(|p| p.name.as_str()).collect()
    }

    /// The kubeconfig reaching the cluster `offered` describes, named `member`: its cluster from the first
    /// provider of the file that `offered` has, its user that provider's plugin. Or why there is none.
    pub(super) fn kubeconfig(
        &self,
        member: &str,
        offered: &Offered,
        allowlist: &KubeconfigAllowlist,
    ) -> Result<Kubeconfig, String> {
        let Some((provider, cluster)) = self
            .providers
            .iter()
            .find_map(|p| offered.get(&p.name).map(|cluster| (p, cluster)))
        else {
            let offers = match offered.names().as_slice() {
                [] => "offers no access provider".to_owned(),
                names => format!("offers access providers {}", names.join(", ")),
            };
            let known = match self.names().as_slice() {
                [] => "the access-providers file names none".to_owned(),
                names => format!("the access-providers file names {}", names.join(", ")),
            };
            return Err(format!("{offers}, none of them known ({known})"));
        };
        // Written by the cluster manager: read as a member kubeconfig's cluster is.
        let cluster = allowlist
            .member_cluster(cluster)
            .map_err(|r| r.to_string())?;
        let exec = provider.exec(&cluster)?;
        let named = |kind: &str| format!("{member}-{kind}");
        Ok(Kubeconfig {
            clusters: vec![NamedCluster {
                name: named("cluster"),
                cluster: Some(cluster),
                ..NamedCluster::default()
            }],
            auth_infos: vec![NamedAuthInfo {
                name: named("user"),
                auth_info: Some(AuthInfo {
                    exec: Some(exec),
                    ..AuthInfo::default()
                }),
                ..NamedAuthInfo::default()
            }],
            contexts: vec![NamedContext {
                name: member.to_owned(),
                context: Some(Context {
                    cluster: named("cluster"),
                    user: Some(named("user")),
                    ..Context::default()
                }),
                ..NamedContext::default()
            }],
            current_context: Some(member.to_owned()),
            ..Kubeconfig::default()
        })
    }
}

impl AccessProvider {
    /// The plugin's configuration for `cluster`: the file's, never interactive, with the profile's extra
    /// arguments and variables as the policies allow.
    fn exec(&self, cluster: &Cluster) -> Result<ExecConfig, String> {
        let mut exec = self.exec_config.clone();
        exec.interactive_mode = Some(ExecInteractiveMode::Never);
        let extension = |name: &str| {
            let extensions = cluster.extensions.iter().flatten();
            extensions
                .filter(|e| e.name == name)
                .map(|e| &e.extension)
                .next_back()
        };
        if self.args_policy == ArgsPolicy::Append
            && let Some(value) = extension(ADDITIONAL_ARGS)
        {
            let args: Vec<String> = serde_json::from_value(value.clone())
                .map_err(|_| format!("extension {ADDITIONAL_ARGS} is not a list of strings"))?;
            exec.args.get_or_insert_default().extend(args);
        }
        if self.profile_sourced_env_vars_policy != EnvsPolicy::Ignore
            && let Some(value) = extension(ADDITIONAL_ENVS)
        {
            let profile: BTreeMap<String, String> = serde_json::from_value(value.clone())
                .map_err(|_| format!("extension {ADDITIONAL_ENVS} is not an object of strings"))?;
            let mut env: BTreeMap<String, String> = BTreeMap::new();
            for var in exec.env.iter().flatten() {
                if let (Some(name), Some(value)) = (var.get("name"), var.get("value")) {
                    env.insert(name.clone(), value.clone());
                }
            }
            for (name, value) in profile {
                match self.profile_sourced_env_vars_policy {
                    EnvsPolicy::Replace => _ = env.insert(name, value),
                    _ => _ = env.entry(name).or_insert(value),
                }
            }
            let vars = env.into_iter().map(|(name, value)| {
                [("name".to_owned(), name), ("value".to_owned(), value)]
                    .into_iter()
                    .collect()
            });
            exec.env = Some(vars.collect());
        }
        Ok(exec)
    }
}

#[cfg(test)]
mod tests;
