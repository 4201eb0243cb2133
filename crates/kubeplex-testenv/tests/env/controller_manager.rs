//! A cluster that asks for a kube-controller-manager behaves like a real one where controllers matter
//! (namespaces, garbage collection, Deployments); a cluster beside it that does not ask stays bare.

use std::time::Duration;

use crate::config_map;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, Resource as _, ResourceExt as _};
use kubeplex_testenv::{SharedTestEnv, TestEnv, eventually};
use serde_json::json;

/// `full` runs a controller manager, `bare` does not.
static CLUSTERS: SharedTestEnv = SharedTestEnv::new(|| {
    TestEnv::builder()
        .clusters(["full", "bare"])
        .controller_manager("full")
});

/// Generous for a loaded two-core machine: the controllers act within a second or two when idle.
const WITHIN: Duration = Duration::from_secs(60);

async fn client(env: &TestEnv, cluster: &str) -> Client {
    env.client(cluster).await.unwrap()
}

#[tokio::test]
async fn a_deleted_namespace_goes_away_only_where_a_controller_manager_runs() {
    let env = CLUSTERS.get().await.unwrap();
    let namespace = env
        .create_namespace(&["full", "bare"], "deleted")
        .await
        .unwrap();
    for cluster in ["full", "bare"] {
        let config_maps: Api<ConfigMap> = Api::namespaced(client(env, cluster).await, &namespace);
        config_maps
            .create(&PostParams::default(), &config_map("content"))
            .await
            .unwrap();
        let namespaces: Api<Namespace> = Api::all(client(env, cluster).await);
        namespaces
            .delete(&namespace, &DeleteParams::default())
            .await
            .unwrap();
    }

    let full: Api<Namespace> = Api::all(client(env, "full").await);
    eventually(
        format!("namespace {namespace} gone from cluster full"),
        WITHIN,
        async || matches!(full.get_opt(&namespace).await, Ok(None)),
    )
    .await;
    // Its content went first: the namespace controller empties a namespace before releasing it.
    let config_maps: Api<ConfigMap> = Api::namespaced(client(env, "full").await, &namespace);
    assert!(config_maps.get_opt("content").await.unwrap().is_none());

    // Meanwhile nothing empties the namespace of the cluster without one: it stays Terminating, content
    // and all, however long after the other one went.
    let bare: Api<Namespace> = Api::all(client(env, "bare").await);
    let stuck = bare.get(&namespace).await.unwrap();
    assert_eq!(
        stuck.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
    let config_maps: Api<ConfigMap> = Api::namespaced(client(env, "bare").await, &namespace);
    assert!(config_maps.get_opt("content").await.unwrap().is_some());
}

#[tokio::test]
async fn a_deployment_gets_a_replica_set_and_its_status() {
    let env = CLUSTERS.get().await.unwrap();
    let namespace = env.create_namespace(&["full"], "deploy").await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client(env, "full").await, &namespace);
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "web" },
        "spec": {
            "replicas": 2,
            "selector": { "matchLabels": { "app": "web" } },
            "template": {
                "metadata": { "labels": { "app": "web" } },
                "spec": { "containers": [{ "name": "web", "image": "registry.invalid/web:1" }] }
            }
        }
    }))
    .unwrap();
    let created = deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let generation = created.metadata.generation.unwrap();

    // The controller may write a status before the ReplicaSet's Pods exist (no `replicas` yet): the status
    // to wait for counts both.
    eventually(
        "the Deployment's status observes its generation and counts its two Pods",
        WITHIN,
        async || {
            let current = deployments.get("web").await.ok()?;
            let status = current.status?;
            (status.observed_generation == Some(generation)
                && status.replicas == Some(2)
                && status
                    .conditions
                    .iter()
                    .flatten()
                    .any(|c| c.type_.as_deref() == Some("Progressing")))
            .then_some(status)
        },
    )
    .await;

    let replica_sets: Api<ReplicaSet> = Api::namespaced(client(env, "full").await, &namespace);
    let owned = eventually("a ReplicaSet owned by the Deployment", WITHIN, async || {
        let list = replica_sets.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|rs| {
            rs.owner_references()
                .iter()
                .any(|o| o.kind == "Deployment" && o.uid == created.uid().unwrap())
        })
    })
    .await;
    assert_eq!(owned.spec.replicas, Some(2));

    // The ReplicaSet controller makes the Pods; no scheduler or kubelet runs, so they stay Pending.
    let pods: Api<Pod> = Api::namespaced(client(env, "full").await, &namespace);
    let pending = eventually("two Pods of the ReplicaSet", WITHIN, async || {
        let list = pods.list(&ListParams::default()).await.ok()?;
        (list.items.len() == 2).then_some(list.items)
    })
    .await;
    for pod in pending {
        assert_eq!(pod.status.and_then(|s| s.phase).as_deref(), Some("Pending"));
        assert_eq!(pod.spec.and_then(|s| s.node_name), None);
    }
}

#[tokio::test]
async fn an_object_whose_owner_is_deleted_is_garbage_collected() {
    let env = CLUSTERS.get().await.unwrap();
    let namespace = env.create_namespace(&["full"], "owned").await.unwrap();
    let config_maps: Api<ConfigMap> = Api::namespaced(client(env, "full").await, &namespace);
    let owner = config_maps
        .create(&PostParams::default(), &config_map("owner"))
        .await
        .unwrap();
    let mut dependent = config_map("dependent");
    dependent.metadata.owner_references = Some(vec![OwnerReference {
        api_version: ConfigMap::api_version(&()).into(),
        kind: ConfigMap::kind(&()).into(),
        name: "owner".into(),
        uid: owner.uid().unwrap(),
        ..OwnerReference::default()
    }]);
    config_maps
        .create(&PostParams::default(), &dependent)
        .await
        .unwrap();
    let bystander = config_maps
        .create(&PostParams::default(), &config_map("bystander"))
        .await
        .unwrap();

    config_maps
        .delete("owner", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the dependent ConfigMap garbage collected",
        WITHIN,
        async || matches!(config_maps.get_opt("dependent").await, Ok(None)),
    )
    .await;
    let still = config_maps.get("bystander").await.unwrap();
    assert_eq!(still.uid(), bystander.uid(), "an unowned object stays");
}

#[tokio::test]
async fn the_controller_manager_stops_and_starts_with_its_api_server() {
    // A private environment: this test stops its cluster.
    let env = TestEnv::builder()
        .cluster("restarted")
        .controller_manager("restarted")
        .start()
        .await
        .unwrap();
    let running = env.pids();
    assert_eq!(
        running.len(),
        3,
        "kube-apiserver, etcd, kube-controller-manager: {running:?}"
    );
    env.stop("restarted").unwrap();
    assert_eq!(
        env.pids().len(),
        1,
        "only etcd runs while the cluster is stopped"
    );
    env.start("restarted").await.unwrap();
    let again = env.pids();
    assert_eq!(again.len(), 3, "{again:?}");
    assert_ne!(again[2], running[2], "a new controller manager");

    // It works again: a deleted namespace goes away.
    let namespace = env.create_namespace(&["restarted"], "after").await.unwrap();
    let namespaces: Api<Namespace> = Api::all(env.client("restarted").await.unwrap());
    namespaces
        .delete(&namespace, &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        format!("namespace {namespace} gone after the restart"),
        WITHIN,
        async || matches!(namespaces.get_opt(&namespace).await, Ok(None)),
    )
    .await;
}
