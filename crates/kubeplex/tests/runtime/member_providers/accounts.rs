//! Credentials for cluster-c as a member: the admin's, or a ServiceAccount token that can be revoked (by
//! deleting its ServiceAccount) or that may do everything to the children but delete them, as kubeconfig
//! text a provider reads.

use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
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
    let admin = create_account(env, namespace, name).await;
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
    granted_token(env, namespace, name).await
}

/// The verbs on the children of an account that may not delete them.
const ALL_BUT_DELETE: [&str; 6] = ["get", "list", "watch", "create", "update", "patch"];

/// Creates the ServiceAccount `namespace/name` in cluster-c with a Role in namespace `apps` that lets it do
/// everything to ConfigMaps (the children) but delete them; returns a token of it once that token can list
/// them. [`grant_delete`] adds `delete`.
pub async fn account_token_without_delete(env: &TestEnv, namespace: &str, name: &str) -> String {
    let admin = create_account(env, namespace, name).await;
    let role = format!("{namespace}-{name}");
    let rules =
        json!([{ "apiGroups": [""], "resources": ["configmaps"], "verbs": ALL_BUT_DELETE }]);
    let role_object: Role = serde_json::from_value(json!({
        "metadata": { "name": role }, "rules": rules,
    }))
    .unwrap();
    let roles: Api<Role> = Api::namespaced(admin.clone(), APPS);
    roles
        .create(&PostParams::default(), &role_object)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": role },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role },
        "subjects": [{ "kind": "ServiceAccount", "name": name, "namespace": namespace }],
    }))
    .unwrap();
    let bindings: Api<RoleBinding> = Api::namespaced(admin, APPS);
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    granted_token(env, namespace, name).await
}

/// Adds `delete` to the Role of [`account_token_without_delete`]'s account `namespace/name`, and waits until
/// the API server's authorizer allows it (it follows Roles through a watch).
pub async fn grant_delete(env: &TestEnv, namespace: &str, name: &str) {
    let admin = env.client(MEMBER).await.unwrap();
    let role = format!("{namespace}-{name}");
    let mut verbs = ALL_BUT_DELETE.to_vec();
    verbs.push("delete");
    let rules =
        json!({ "rules": [{ "apiGroups": [""], "resources": ["configmaps"], "verbs": verbs }] });
    let roles: Api<Role> = Api::namespaced(admin.clone(), APPS);
    roles
        .patch(&role, &PatchParams::default(), &Patch::Merge(&rules))
        .await
        .unwrap();
    let user = format!("system:serviceaccount:{namespace}:{name}");
    let what = format!("{user} may delete ConfigMaps in {APPS}");
    wait_until(&what, async || {
        let review: SubjectAccessReview = serde_json::from_value(json!({
            "spec": { "user": user, "resourceAttributes": {
                "namespace": APPS, "verb": "delete", "resource": "configmaps" } },
        }))
        .unwrap();
        let reviews: Api<SubjectAccessReview> = Api::all(admin.clone());
        let answer = reviews.create(&PostParams::default(), &review).await;
        let allowed = answer
            .map_err(|e| e.to_string())?
            .status
            .is_some_and(|s| s.allowed);
        if allowed {
            Ok(())
        } else {
            Err("not yet".into())
        }
    })
    .await;
}

/// Creates the ServiceAccount `namespace/name` in cluster-c; returns an admin client of cluster-c.
async fn create_account(env: &TestEnv, namespace: &str, name: &str) -> Client {
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
    admin
}

/// A token of the ServiceAccount `namespace/name` of cluster-c, once it can list the children (RBAC follows
/// its objects through a watch).
async fn granted_token(env: &TestEnv, namespace: &str, name: &str) -> String {
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
