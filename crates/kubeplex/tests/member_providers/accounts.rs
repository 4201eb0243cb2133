//! Credentials for cluster-c as a member: the admin's, or a ServiceAccount token that can be revoked (by
//! deleting its ServiceAccount), as kubeconfig text a provider reads.

use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use kubeplex_testenv::TestEnv;
use serde_json::json;

use crate::spread::{APPS, wait_until};

/// The member every test adds: cluster-c, named as its kubeconfig context.
pub const MEMBER: &str = "cluster-c";

/// A kubeconfig with cluster-c's context only (the admin's credentials), current.
pub fn admin_kubeconfig(env: &TestEnv) -> Kubeconfig {
    let mut kubeconfig = env.kubeconfig().clone();
    kubeconfig.contexts.retain(|c| c.name == MEMBER);
    let context = kubeconfig.contexts[0].context.clone().unwrap();
    kubeconfig.clusters.retain(|c| c.name == context.cluster);
    kubeconfig
        .auth_infos
        .retain(|a| context.user.as_ref() == Some(&a.name));
    kubeconfig.current_context = Some(MEMBER.into());
    kubeconfig
}

/// A kubeconfig with cluster-c's context only, authenticating with `token` only.
pub fn token_kubeconfig(env: &TestEnv, token: &str) -> Kubeconfig {
    env.kubeconfig_with_tokens(&[(MEMBER, token)]).unwrap()
}

/// `kubeconfig` as the text of a file or a Secret (JSON is YAML).
pub fn text(kubeconfig: &Kubeconfig) -> String {
    serde_json::to_string(kubeconfig).unwrap()
}

/// A client of cluster-c authenticating with `token`.
async fn token_client(env: &TestEnv, token: &str) -> Client {
    let options = KubeConfigOptions::default();
    let config = Config::from_custom_kubeconfig(token_kubeconfig(env, token), &options);
    Client::try_from(config.await.unwrap()).unwrap()
}

/// Creates the ServiceAccount `namespace/name` in cluster-c, bound to `cluster-admin`, and returns a token
/// of it once that token can list the children (RBAC follows its objects through a watch).
pub async fn account_token(env: &TestEnv, namespace: &str, name: &str) -> String {
    let admin = env.client(MEMBER).await.unwrap();
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": { "name": format!("{namespace}-{name}") },
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin",
        },
        "subjects": [{ "kind": "ServiceAccount", "name": name, "namespace": namespace }],
    }))
    .unwrap();
    let bindings: Api<ClusterRoleBinding> = Api::all(admin);
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let token = env.service_account_token(MEMBER, namespace, name);
    let token = token.await.unwrap();
    let children: Api<ConfigMap> = Api::namespaced(token_client(env, &token).await, APPS);
    let what = format!("ServiceAccount {namespace}/{name}'s grant in force");
    wait_until(&what, async || {
        let listed = children.list(&ListParams::default()).await;
        listed.map(|_| ()).map_err(|e| e.to_string())
    })
    .await;
    token
}

/// Revokes every token of the ServiceAccount `namespace/name` by deleting it, and waits until `token` is
/// rejected (the API server keeps a token it accepted for up to 10 s).
pub async fn revoke(env: &TestEnv, namespace: &str, name: &str, token: &str) {
    let accounts: Api<ServiceAccount> =
        Api::namespaced(env.client(MEMBER).await.unwrap(), namespace);
    accounts
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
    let client = token_client(env, token).await;
    let what = format!("ServiceAccount {namespace}/{name}'s token rejected");
    wait_until(&what, async || match client.apiserver_version().await {
        Err(kube::Error::Api(status)) if status.code == 401 => Ok(()),
        Ok(_) => Err("still accepted".into()),
        Err(error) => Err(error.to_string()),
    })
    .await;
}
