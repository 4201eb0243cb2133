//! The placement operator on real clusters (control, cluster-a, cluster-b, and cluster-c as a member): a
//! Placement runs in the cluster with the most free CPU and moves, without any polling, when that
//! cluster's Nodes are cordoned or go NotReady, when a member with more CPU joins, and when a cluster
//! stops answering; two Placements share the `apps` Namespace; deleted, they leave no Deployment behind.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::config::KubeConfigOptions;
use kube::{Client, CustomResourceExt};
use kubeplex::members::{LeavePolicy, Members};
use kubeplex::ownership::{PARENT_UID_LABEL, SHARED_LABEL};
use kubeplex::{ClusterState, Manager};
use kubeplex_placement::{APPS, PLACEMENTS, Placement, PlacementSpec, Placer};
use kubeplex_testenv::{TestEnv, eventually};

/// How long anything the clusters do may take.
const WAIT: Duration = Duration::from_secs(60);
/// How often the operator pings each cluster: a frozen one is noticed within ~6 s (one interval and the ping's
/// own timeout), not ~15 s as with the default interval.
const PING: Duration = Duration::from_secs(1);

/// The child clusters a Placement may go to.
const CHILDREN: [&str; 3] = ["cluster-a", "cluster-b", "cluster-c"];

async fn client(env: &TestEnv, cluster: &str) -> Client {
    env.client(cluster).await.unwrap()
}

async fn create_namespace(client: Client, name: &str) {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client)
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
}

/// A Ready Node `name` with `cpu` allocatable cores in `cluster`.
async fn add_node(env: &TestEnv, cluster: &str, name: &str, cpu: &str) {
    let nodes: Api<Node> = Api::all(client(env, cluster).await);
    let node = Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    };
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let status = serde_json::json!({ "status": { "allocatable": { "cpu": cpu } } });
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    set_ready(env, cluster, name, true).await;
}

/// Sets the Node's `Ready` condition, as its kubelet would.
async fn set_ready(env: &TestEnv, cluster: &str, name: &str, ready: bool) {
    let nodes: Api<Node> = Api::all(client(env, cluster).await);
    let status = if ready { "True" } else { "False" };
    let patch = serde_json::json!({ "status": { "conditions": [
        { "type": "Ready", "status": status, "reason": "KubeletReady", "message": "set by the test" }
    ] } });
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Cordons the Node (or uncordons it), as `kubectl cordon` does.
async fn cordon(env: &TestEnv, cluster: &str, name: &str, cordoned: bool) {
    let nodes: Api<Node> = Api::all(client(env, cluster).await);
    let patch = serde_json::json!({ "spec": { "unschedulable": cordoned } });
    nodes
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Waits until the Placement's Deployment runs in exactly `expected` among `looked_at`, and its status
/// says so.
async fn wait_placed(env: &TestEnv, looked_at: &[&str], expected: &[&str]) {
    let placements: Api<Placement> = Api::namespaced(client(env, "control").await, PLACEMENTS);
    let said: Vec<&str> = expected.to_vec();
    eventually(format!("status.placed {said:?}"), WAIT, async || {
        let placed = match placements.get_opt("web").await.map_err(|e| e.to_string())? {
            Some(placement) => placement.status.map(|s| s.placed).unwrap_or_default(),
            None => Vec::new(),
        };
        if placed == said {
            Ok(())
        } else {
            Err(format!("it says {placed:?}"))
        }
    })
    .await;
    let expected: BTreeSet<&str> = expected.iter().copied().collect();
    eventually(
        format!("the Deployment in {expected:?}"),
        WAIT,
        async || {
            let mut found = BTreeSet::new();
            for &cluster in looked_at {
                let deployments: Api<Deployment> =
                    Api::namespaced(client(env, cluster).await, APPS);
                let got = deployments
                    .get_opt("web")
                    .await
                    .map_err(|e| e.to_string())?;
                if got.is_some() {
                    found.insert(cluster);
                }
            }
            if found == expected {
                Ok(())
            } else {
                Err(format!("it runs in {found:?}"))
            }
        },
    )
    .await;
}

/// A second Placement, in two clusters, shares the `apps` Namespace with `web` in cluster-a without a
/// conflict; deleted, it leaves the Namespace to `web` there, and in place (unlinked) in cluster-b.
async fn shares_apps(env: &TestEnv, placements: &Api<Placement>) {
    let api = Placement::new(
        "api",
        PlacementSpec {
            image: "nginx:1.27".into(),
            clusters: 2,
        },
    );
    placements
        .create(&PostParams::default(), &api)
        .await
        .unwrap();
    let sharers = |namespace: &Namespace| {
        let labels = namespace.metadata.labels.clone().unwrap_or_default();
        let prefix = format!("{PARENT_UID_LABEL}.");
        labels.keys().filter(|k| k.starts_with(&prefix)).count()
    };
    let namespaces = async |cluster: &str| Api::<Namespace>::all(client(env, cluster).await);
    let (in_a, in_b) = (namespaces("cluster-a").await, namespaces("cluster-b").await);
    eventually(
        "api Ready in both clusters, apps shared in cluster-a",
        WAIT,
        async || {
            let placement = placements.get("api").await.map_err(|e| e.to_string())?;
            let status = placement.status.unwrap_or_default();
            let ready = |cluster: &str| {
                let state = status.fleet.clusters.get(cluster).map(|c| c.state);
                state == Some(ClusterState::Applied)
            };
            let apps = in_a.get(APPS).await.map_err(|e| e.to_string())?;
            if ready("cluster-a") && ready("cluster-b") && sharers(&apps) == 2 {
                Ok(())
            } else {
                Err(format!(
                    "{:?}; {:?}",
                    status.fleet.clusters, apps.metadata.labels
                ))
            }
        },
    )
    .await;
    placements
        .delete("api", &DeleteParams::default())
        .await
        .unwrap();
    eventually("api gone, apps left to web", WAIT, async || {
        if placements
            .get_opt("api")
            .await
            .map_err(|e| e.to_string())?
            .is_some()
        {
            return Err("api still there".into());
        }
        let (a, b) = (in_a.get(APPS).await, in_b.get(APPS).await);
        let (a, b) = (a.map_err(|e| e.to_string())?, b.map_err(|e| e.to_string())?);
        let unlinked = b
            .metadata
            .labels
            .as_ref()
            .is_none_or(|l| !l.contains_key(SHARED_LABEL));
        if sharers(&a) == 1 && sharers(&b) == 0 && unlinked {
            Ok(())
        } else {
            Err(format!("{:?}; {:?}", a.metadata.labels, b.metadata.labels))
        }
    })
    .await;
}

/// How cluster-c is reached, as a member provider would hand it over.
async fn cluster_c(env: &TestEnv) -> kube::Config {
    let options = KubeConfigOptions {
        context: Some("cluster-c".into()),
        ..KubeConfigOptions::default()
    };
    kube::Config::from_custom_kubeconfig(env.kubeconfig().clone(), &options)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_placement_follows_the_free_cpu_of_the_fleet_without_polling() {
    let env = TestEnv::builder()
        .clusters(["control", "cluster-a", "cluster-b", "cluster-c"])
        .crd("control", Placement::crd())
        .start()
        .await
        .unwrap();
    create_namespace(client(&env, "control").await, PLACEMENTS).await;
    add_node(&env, "cluster-a", "a-1", "8").await;
    add_node(&env, "cluster-b", "b-1", "4000m").await;
    add_node(&env, "cluster-c", "c-1", "16").await;

    let members = Members::new();
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Placer)
        .members(members.clone(), LeavePolicy::Delete)
        .ping_interval(PING)
        .start()
        .await
        .unwrap();
    tokio::time::timeout(WAIT, running.wait_started())
        .await
        .expect("started in time")
        .unwrap();
    let placements: Api<Placement> = Api::namespaced(client(&env, "control").await, PLACEMENTS);
    let web = Placement::new(
        "web",
        PlacementSpec {
            image: "nginx:1.27".into(),
            clusters: 1,
        },
    );
    placements
        .create(&PostParams::default(), &web)
        .await
        .unwrap();
    let typed = ["cluster-a", "cluster-b"];
    wait_placed(&env, &typed, &["cluster-a"]).await;
    shares_apps(&env, &placements).await;

    // Cordoned, its CPU is not free: the Deployment moves, and back when it is uncordoned.
    cordon(&env, "cluster-a", "a-1", true).await;
    wait_placed(&env, &typed, &["cluster-b"]).await;
    cordon(&env, "cluster-a", "a-1", false).await;
    wait_placed(&env, &typed, &["cluster-a"]).await;

    // A Node that goes NotReady (its status only) does the same.
    set_ready(&env, "cluster-a", "a-1", false).await;
    wait_placed(&env, &typed, &["cluster-b"]).await;
    set_ready(&env, "cluster-a", "a-1", true).await;
    wait_placed(&env, &typed, &["cluster-a"]).await;

    // A member with more CPU joins: its Nodes are read from its cache, and it gets the Deployment.
    members.add("cluster-c", cluster_c(&env).await).await;
    wait_placed(&env, &CHILDREN, &["cluster-c"]).await;

    // It stops answering (frozen): the next best cluster gets the Deployment, with no edit anywhere.
    env.freeze("cluster-c").unwrap();
    wait_placed(&env, &typed, &["cluster-a"]).await;
    env.thaw("cluster-c").unwrap();
    wait_placed(&env, &CHILDREN, &["cluster-c"]).await;

    // Deleted: nothing is left anywhere.
    placements
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    wait_placed(&env, &CHILDREN, &[]).await;
    eventually("the Placement gone", WAIT, async || {
        match placements.get_opt("web").await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    tokio::time::timeout(WAIT, running.shutdown())
        .await
        .expect("the operator shuts down in time");
}
