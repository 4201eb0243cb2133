//! A cluster registered as Cluster API does it: its `<cluster>-kubeconfig` Secret (type
//! `cluster.x-k8s.io/secret`, the kubeconfig under `value`, label `cluster.x-k8s.io/cluster-name`) joins
//! it as a member named as the cluster, and deleting the Secret makes it leave. Cluster API's other Secrets
//! of the cluster are not members.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use kubeplex::prelude::*;
use kubeplex::{members::LeavePolicy, members::MEMBER_FINALIZER};

use super::accounts::{MEMBER, admin_kubeconfig, text};
use super::{member_status, start};
use crate::spread::{Spread, create_spread, has_child, spreader, wait_child, wait_until};
use crate::support::{Fleet, probe, reasons};

spreader!(ClusterApiJoin, "spread-capi");

/// A Secret as Cluster API writes them for cluster-c: `name`, of `type_`, with `kubeconfig` under `value`.
pub fn capi_secret(name: &str, type_: &str, kubeconfig: &str) -> Secret {
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": name, "labels": { "cluster.x-k8s.io/cluster-name": MEMBER } },
        "type": type_,
        "stringData": { "value": kubeconfig },
    }))
    .unwrap()
}

#[tokio::test]
async fn a_cluster_api_kubeconfig_secret_joins_its_cluster_and_its_deletion_makes_it_leave() {
    let env = super::env().await;
    let namespace = env.create_namespace(&["control"], "capi").await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(env.client("control").await.unwrap(), &namespace);
    let provider = kubeplex::members::KubeconfigSecrets::cluster_api(Fleet::Control, &namespace);
    let running = start(env, ClusterApiJoin, provider, LeavePolicy::Delete).await;
    create_spread(env, "spread-capi", "web").await;
    let child = "web-cluster-api-join";
    wait_child(env, "cluster-a", child, true).await;

    // Cluster API's other Secrets of the cluster: a user kubeconfig that does not work, a CA of another
    // type (Cluster API labels its CA Secrets so too). Neither is a member, nor a rival for the cluster's name.
    let params = PostParams::default();
    let broken = "not: [a kubeconfig";
    let user = capi_secret(
        "cluster-c-user-kubeconfig",
        "cluster.x-k8s.io/secret",
        broken,
    );
    secrets.create(&params, &user).await.unwrap();
    let ca = capi_secret("cluster-c-ca", "Opaque", broken);
    secrets.create(&params, &ca).await.unwrap();
    let kubeconfig = text(&admin_kubeconfig(env));
    let secret = capi_secret(
        "cluster-c-kubeconfig",
        "cluster.x-k8s.io/secret",
        &kubeconfig,
    );
    secrets.create(&params, &secret).await.unwrap();
    wait_child(env, MEMBER, child, true).await;
    assert_eq!(member_status(&running, "ready").await, "");
    let (code, ready) = probe(running.probe_address().unwrap(), "/readyz").await;
    assert_eq!(code, 200, "{ready:#}");
    assert_eq!(reasons(&ready, MEMBER), "", "{ready:#}");
    let held = secrets.get("cluster-c-kubeconfig").await.unwrap();
    assert_eq!(held.finalizers(), [MEMBER_FINALIZER]);
    assert!(
        secrets
            .get("cluster-c-user-kubeconfig")
            .await
            .unwrap()
            .finalizers()
            .is_empty()
    );

    // The cluster deleted (Cluster API deletes its Secret): the member leaves, its children go first.
    secrets
        .delete("cluster-c-kubeconfig", &DeleteParams::default())
        .await
        .unwrap();
    wait_child(env, MEMBER, child, false).await;
    wait_until("the cluster's Secret gone", async || {
        match secrets.get_opt("cluster-c-kubeconfig").await {
            Ok(None) => Ok(()),
            Ok(Some(held)) => Err(format!("finalizers: {:?}", held.finalizers())),
            Err(error) => Err(error.to_string()),
        }
    })
    .await;
    assert!(!running.readiness().clusters.contains_key(MEMBER));
    assert!(has_child(env, "cluster-a", child).await);
    crate::support::stop(running).await;
}
