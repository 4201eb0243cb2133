//! A member whose credentials are rotated to another cluster: the member as it was leaves by its policy,
//! the new cluster joins under its name, and back.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::ResourceExt;
use kube::api::Api;
use kubeplex::Manager;
use kubeplex::members::{LeavePolicy, Members};
use kubeplex::prelude::*;
use kubeplex_testenv::{TestEnv, eventually};

use crate::spread::{APPS, Spread, create_spread, wait_child};
use crate::support::{Fleet, create_namespace, polling, stop, wait_started};

crate::spread::spreader!(Rotating, "identity-rotating");

/// How `cluster` is reached, as a provider would hand it over.
async fn config_of(env: &TestEnv, cluster: &str) -> kube::Config {
    let options = kube::config::KubeConfigOptions {
        context: Some(cluster.into()),
        ..Default::default()
    };
    kube::Config::from_custom_kubeconfig(env.kubeconfig().clone(), &options)
        .await
        .unwrap()
}

/// The identity of `cluster`, asked directly.
async fn identity_of(env: &TestEnv, cluster: &str) -> String {
    let namespaces: Api<Namespace> = Api::all(env.client(cluster).await.unwrap());
    namespaces.get("kube-system").await.unwrap().uid().unwrap()
}

#[tokio::test]
async fn a_member_whose_credentials_reach_another_cluster_leaves_and_joins_anew() {
    let env = crate::members::env().await;
    for cluster in ["cluster-a", "cluster-b", "cluster-c"] {
        create_namespace(&env.client(cluster).await.unwrap(), APPS).await;
    }
    let members = Members::new();
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Rotating)
        .members(members.clone(), LeavePolicy::Delete)
        .start()
        .await
        .unwrap();
    wait_started(&running, "started").await;
    create_spread(env, "identity-rotating", "moving").await;
    let child = "moving-rotating";
    members.add("edge", config_of(env, "cluster-c").await).await;
    wait_child(env, "cluster-c", child, true).await;
    let identity = |report: &kubeplex::readiness::ReadinessReport| {
        report.clusters.get("edge").and_then(|c| c.identity.clone())
    };
    assert_eq!(
        identity(&running.readiness()),
        Some(identity_of(env, "cluster-c").await)
    );

    // Its credentials now reach cluster-b: the member as it was leaves under `delete` (its child in
    // cluster-c goes), and cluster-b joins under its name with a child of its own.
    members.add("edge", config_of(env, "cluster-b").await).await;
    wait_child(env, "cluster-c", child, false).await;
    wait_child(env, "cluster-b", child, true).await;
    let in_b = identity_of(env, "cluster-b").await;
    eventually("edge identified as cluster-b", polling(), async || {
        let report = running.readiness();
        match identity(&report) == Some(in_b.clone()) {
            true => Ok(()),
            false => Err(format!("{report:#?}")),
        }
    })
    .await;

    // And back.
    members.add("edge", config_of(env, "cluster-c").await).await;
    wait_child(env, "cluster-b", child, false).await;
    wait_child(env, "cluster-c", child, true).await;
    members.remove("edge").await;
    stop(running).await;
}
