//! Kubeconfigs for an environment: one context per cluster, named as the cluster.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use kube::config::Kubeconfig;
use serde_json::{Value, json};

use crate::control_plane::ClusterPki;

/// Which credentials a context carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Credential {
    /// `admin`, in group `system:masters`: may do everything.
    Admin,
    /// A user the API server authenticates but that no RBAC rule grants anything: every request gets 403.
    NoPermissions,
    /// A bearer token the API server does not know: every request gets 401.
    Invalid,
}

/// Makes `context` in `kubeconfig` authenticate with `user` instead: a kubeconfig `user` object as JSON
/// (`{"token": ..}`, `{"exec": {..}}`), for tests of credentials the environment does not issue itself.
///
/// # Panics
/// When `kubeconfig` has no such context (or user), or `user` is not a kubeconfig user.
pub fn set_user(kubeconfig: &mut Kubeconfig, context: &str, user: Value) {
    let name = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.as_ref())
        .and_then(|c| c.user.clone())
        .unwrap_or_else(|| panic!("the kubeconfig has no context {context:?} with a user"));
    let entry = kubeconfig
        .auth_infos
        .iter_mut()
        .find(|a| a.name == name)
        .unwrap_or_else(|| panic!("the kubeconfig has no user {name:?}"));
    entry.auth_info = Some(serde_json::from_value(user).expect("a kubeconfig user"));
}

/// What the kubeconfig needs to know of one cluster.
pub(crate) struct ClusterEntry<'a> {
    pub(crate) name: &'a str,
    pub(crate) server: String,
    pub(crate) pki: &'a ClusterPki,
    pub(crate) credential: Credential,
}

/// A kubeconfig with one cluster, user and context per entry; the first cluster is the current context.
pub(crate) fn build(entries: &[ClusterEntry<'_>]) -> (Kubeconfig, Value) {
    let b64 = |pem: &str| STANDARD.encode(pem);
    let clusters: Vec<Value> = entries
        .iter()
        .map(|e| {
            json!({
                "name": e.name,
                "cluster": { "server": e.server, "certificate-authority-data": b64(&e.pki.ca.cert_pem) }
            })
        })
        .collect();
    let users: Vec<Value> = entries
        .iter()
        .map(|e| {
            let user = match e.credential {
                Credential::Admin => json!({
                    "client-certificate-data": b64(&e.pki.admin.cert_pem),
                    "client-key-data": b64(&e.pki.admin.key_pem),
                }),
                Credential::NoPermissions => json!({
                    "client-certificate-data": b64(&e.pki.no_permissions.cert_pem),
                    "client-key-data": b64(&e.pki.no_permissions.key_pem),
                }),
                Credential::Invalid => json!({ "token": "kubeplex-testenv-invalid-token" }),
            };
            json!({ "name": user_name(e), "user": user })
        })
        .collect();
    let contexts: Vec<Value> = entries
        .iter()
        .map(|e| json!({ "name": e.name, "context": { "cluster": e.name, "user": user_name(e) } }))
        .collect();
    let document = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": clusters,
        "users": users,
        "contexts": contexts,
        "current-context": entries.first().map(|e| e.name),
    });
    let kubeconfig =
        serde_json::from_value(document.clone()).expect("a generated kubeconfig is well-formed");
    (kubeconfig, document)
}

fn user_name(entry: &ClusterEntry<'_>) -> String {
    let suffix = match entry.credential {
        Credential::Admin => "admin",
        Credential::NoPermissions => "no-permissions",
        Credential::Invalid => "invalid",
    };
    format!("{}-{suffix}", entry.name)
}
