//! What a member's kubeconfig may contain: its context's cluster and user read field by field, inline
//! credentials kept, and anything that would run a command, read a local file or weaken TLS refused
//! unless the operator allowed it.
//!
//! A member kubeconfig comes from whoever may write the members' Secrets (or files, or ClusterProfiles):
//! kube honours everything a kubeconfig says, so only the fields below ever reach it.

use std::collections::BTreeSet;
use std::fmt;

use kube::config::{
    AuthInfo, Cluster, Context, ExecConfig, ExecInteractiveMode, Kubeconfig, NamedAuthInfo,
    NamedCluster, NamedContext,
};

/// Where the rules are explained, named in every refusal.
const DOCS: &str = "docs/fleets.md";

/// Environment variables an exec plugin may not be given: they change which program runs, whatever
/// the command (`PATH` finds a relative command; the dynamic loader's variables load other code).
const RUNS_OTHER_CODE: [&str; 3] = ["PATH", "LD_", "DYLD_"];

/// What a member kubeconfig may contain beyond its inline credentials: the operator's opt-ins.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct KubeconfigAllowlist {
    /// The exec plugin commands a member's user may run, compared as written.
    pub(crate) exec_commands: BTreeSet<String>,
    /// Whether a member's cluster may set `insecure-skip-tls-verify: true`.
    pub(crate) insecure: bool,
}

/// A field of a member kubeconfig that it may not set, and what it would have done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RefusedField {
    /// `cluster` or `user`.
    part: &'static str,
    /// The field's name as a kubeconfig spells it (never its value).
    field: String,
    /// Why it is refused, in a few words.
    why: &'static str,
}

/// A member kubeconfig that sets fields it may not: every one of them is named, none of their values.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) struct Refused(pub(crate) Vec<RefusedField>);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let named: Vec<String> = (self.0.iter())
            .map(|r| format!("the {}'s {} ({})", r.part, r.field, r.why))
            .collect();
        let listed = match named.as_slice() {
            [.., last] if named.len() > 1 => {
                format!("{} and {last}", named[..named.len() - 1].join(", "))
            }
            _ => named.concat(),
        };
        write!(
            f,
            "its kubeconfig sets {listed}, which member kubeconfigs may not; see {DOCS}"
        )
    }
}

impl KubeconfigAllowlist {
    /// The single-context kubeconfig kube is given for `context` of `kubeconfig`: that context's
    /// cluster and user built anew from the fields allowed, so that kube can neither read a file nor
    /// run a command the operator did not allow; or every field it may not set.
    pub(crate) fn member_kubeconfig(
        &self,
        kubeconfig: &Kubeconfig,
        context: &str,
    ) -> Result<Kubeconfig, Refused> {
        let named = (kubeconfig.contexts.iter()).find(|c| c.name == context);
        let target = named.and_then(|c| c.context.as_ref());
        // One the context names but the kubeconfig lacks is left out: kube reports a missing cluster,
        // and takes a missing user as anonymous, as client-go does.
        let cluster = target.and_then(|t| kubeconfig.clusters.iter().find(|c| c.name == t.cluster));
        let user = target.and_then(|t| {
            let named = |a: &&NamedAuthInfo| t.user.as_deref() == Some(a.name.as_str());
            kubeconfig.auth_infos.iter().find(named)
        });
        let mut refused = Vec::new();
        let cluster = cluster.map(|c| NamedCluster {
            name: c.name.clone(),
            cluster: c.cluster.as_ref().map(|c| self.cluster(c, &mut refused)),
            ..NamedCluster::default()
        });
        let user = user.map(|u| NamedAuthInfo {
            name: u.name.clone(),
            auth_info: u.auth_info.as_ref().map(|a| self.user(a, &mut refused)),
            ..NamedAuthInfo::default()
        });
        if !refused.is_empty() {
            return Err(Refused(refused));
        }
        Ok(Kubeconfig {
            clusters: cluster.into_iter().collect(),
            auth_infos: user.into_iter().collect(),
            contexts: target
                .map(|t| NamedContext {
                    name: context.to_owned(),
                    context: Some(Context {
                        cluster: t.cluster.clone(),
                        user: t.user.clone(),
                        namespace: t.namespace.clone(),
                        ..Context::default()
                    }),
                    ..NamedContext::default()
                })
                .into_iter()
                .collect(),
            current_context: Some(context.to_owned()),
            ..Kubeconfig::default()
        })
    }

    /// The connection settings of a member's `cluster` that may reach kube (also a ClusterProfile's,
    /// whose credentials come from the operator's own plugins); or every field it may not set.
    pub(crate) fn member_cluster(&self, cluster: &Cluster) -> Result<Cluster, Refused> {
        let mut refused = Vec::new();
        let allowed = self.cluster(cluster, &mut refused);
        match refused.is_empty() {
            true => Ok(allowed),
            false => Err(Refused(refused)),
        }
    }

    /// `cluster`'s allowed fields; the others set are added to `refused`.
    fn cluster(&self, cluster: &Cluster, refused: &mut Vec<RefusedField>) -> Cluster {
        let mut refuse = |field: &str, why| {
            let field = field.to_owned();
            refused.push(RefusedField {
                part: "cluster",
                field,
                why,
            });
        };
        if set(&cluster.certificate_authority) {
            refuse("certificate-authority", "a local file");
        }
        if set(&cluster.proxy_url) {
            refuse("proxy-url", "a proxy");
        }
        let insecure = cluster.insecure_skip_tls_verify == Some(true);
        if insecure && !self.insecure {
            refuse("insecure-skip-tls-verify", "no TLS verification");
        }
        for field in cluster.other.keys() {
            refuse(field, "a field kubeplex does not read");
        }
        Cluster {
            server: cluster.server.clone(),
            certificate_authority_data: cluster.certificate_authority_data.clone(),
            tls_server_name: cluster.tls_server_name.clone(),
            insecure_skip_tls_verify: insecure.then_some(true),
            disable_compression: cluster.disable_compression,
            // Data an exec plugin is given with the cluster (`provideClusterInfo`); nothing kube acts on.
            extensions: cluster.extensions.clone(),
            ..Cluster::default()
        }
    }

    /// `user`'s allowed fields; the others set are added to `refused`.
    fn user(&self, user: &AuthInfo, refused: &mut Vec<RefusedField>) -> AuthInfo {
        let mut refuse = |field: &str, why| {
            let field = field.to_owned();
            refused.push(RefusedField {
                part: "user",
                field,
                why,
            });
        };
        let files = [
            ("tokenFile", &user.token_file),
            ("client-certificate", &user.client_certificate),
            ("client-key", &user.client_key),
        ];
        for (field, value) in files {
            if set(value) {
                refuse(field, "a local file");
            }
        }
        if set(&user.username) {
            refuse("username", "basic authentication");
        }
        if user.password.is_some() {
            refuse("password", "basic authentication");
        }
        let impersonates = [
            ("as", set(&user.impersonate)),
            ("as-uid", set(&user.impersonate_uid)),
            ("as-groups", user.impersonate_groups.is_some()),
            ("as-user-extra", user.impersonate_user_extra.is_some()),
        ];
        for (field, _) in impersonates.iter().filter(|(_, set)| *set) {
            refuse(field, "impersonation");
        }
        if user.auth_provider.is_some() {
            refuse("auth-provider", "a command or local files");
        }
        let exec = user.exec.as_ref().and_then(|exec| match self.exec(exec) {
            Ok(allowed) => Some(allowed),
            Err((field, why)) => {
                refuse(field, why);
                None
            }
        });
        for field in user.other.keys() {
            refuse(field, "a field kubeplex does not read");
        }
        AuthInfo {
            token: user.token.clone(),
            client_certificate_data: user.client_certificate_data.clone(),
            client_key_data: user.client_key_data.clone(),
            exec,
            ..AuthInfo::default()
        }
    }

    /// The exec plugin's configuration as kube may run it (never interactive); or what is refused, and why.
    fn exec(&self, exec: &ExecConfig) -> Result<ExecConfig, (&'static str, &'static str)> {
        let command = exec.command.as_deref().unwrap_or_default();
        if self.exec_commands.is_empty() {
            return Err(("exec", "a command"));
        }
        if !self.exec_commands.contains(command) {
            return Err(("exec", "a command the operator does not allow"));
        }
        let names = exec.env.iter().flatten().filter_map(|var| var.get("name"));
        if names
            .map(|n| n.to_ascii_uppercase())
            .any(|n| runs_other_code(&n))
        {
            return Err(("exec env", "a variable that changes which program runs"));
        }
        Ok(ExecConfig {
            api_version: exec.api_version.clone(),
            command: exec.command.clone(),
            args: exec.args.clone(),
            env: exec.env.clone(),
            interactive_mode: Some(ExecInteractiveMode::Never),
            provide_cluster_info: exec.provide_cluster_info,
            ..ExecConfig::default()
        })
    }
}

/// Whether the environment variable `name` (upper case) is one of [`RUNS_OTHER_CODE`].
fn runs_other_code(name: &str) -> bool {
    RUNS_OTHER_CODE
        .iter()
        .any(|r| name == *r || (r.ends_with('_') && name.starts_with(r)))
}

/// Whether an optional text field is set (client-go takes an empty one as unset).
fn set(field: &Option<String>) -> bool {
    field.as_deref().is_some_and(|f| !f.is_empty())
}

#[cfg(test)]
mod tests;
