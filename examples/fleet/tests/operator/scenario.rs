//! The original scenario against three real clusters: children in other clusters, repair, cleanup that
//! never orphans, degraded operation, and the orphan sweep. cluster-b is stopped for the operator alone,
//! behind a relay that refuses its connections (as a stopped server does), the shared server still up.

use std::time::Duration;

use crate::support::{Stage, WAIT, eventually, stage};
use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kubeplex::{ClusterState, Context, ownership::PARENT_ANNOTATION, ownership::PARENT_UID_LABEL};
use kubeplex_fleet::{AppDeployer, AppDeployment, Fleet};

const CHILDREN: [Fleet; 2] = [Fleet::ClusterA, Fleet::ClusterB];

/// The Deployment `name` in `namespace` of `cluster`, if it exists.
async fn child(stage: &Stage, cluster: Fleet, namespace: &str, name: &str) -> Option<Deployment> {
    let api: Api<Deployment> =
        Api::namespaced(stage.env.client(cluster.name()).await.unwrap(), namespace);
    api.get_opt(name).await.unwrap()
}

/// Every Deployment in the test's child namespaces of `cluster` that carries a parent reference.
async fn linked_children(stage: &Stage, cluster: Fleet) -> Vec<Deployment> {
    let client = stage.env.client(cluster.name()).await.unwrap();
    let mut linked = Vec::new();
    for namespace in &stage.children {
        let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
        let linked_only = ListParams::default().labels(PARENT_UID_LABEL);
        linked.extend(api.list(&linked_only).await.unwrap().items);
    }
    linked
}

/// Checks that every child of `name` in `clusters` exists with this image and replicas, linked to its parent.
async fn children_match(
    stage: &Stage,
    clusters: &[Fleet],
    name: &str,
    image: &str,
    replicas: i32,
) -> Result<(), String> {
    let parent = (stage.apps().await.get(name).await).map_err(|e| e.to_string())?;
    for &cluster in clusters {
        for namespace in &stage.children {
            let deployment = child(stage, cluster, namespace, name)
                .await
                .ok_or(format!("{cluster}/{namespace}/{name} missing"))?;
            let spec = &deployment.spec;
            let actual_image = spec
                .template
                .spec
                .as_ref()
                .and_then(|p| p.containers[0].image.clone());
            if spec.replicas != Some(replicas) || actual_image.as_deref() != Some(image) {
                return Err(format!(
                    "{cluster}/{namespace}/{name}: {:?} replicas of {actual_image:?}",
                    spec.replicas
                ));
            }
            assert_eq!(
                deployment.annotations()[PARENT_ANNOTATION],
                format!("control/{}/{name}", stage.parents)
            );
            assert_eq!(deployment.labels()[PARENT_UID_LABEL], parent.uid().unwrap());
            assert!(
                deployment.owner_references().is_empty(),
                "no ownerReference may span clusters"
            );
        }
    }
    Ok(())
}

fn cluster_state(app: &AppDeployment, cluster: Fleet) -> Option<(ClusterState, String)> {
    let status = app.status.as_ref()?.fleet.clusters.get(cluster.name())?;
    Some((status.state, status.message.clone().unwrap_or_default()))
}

fn ready(app: &AppDeployment) -> Option<(String, String)> {
    let condition = app
        .status
        .as_ref()?
        .fleet
        .conditions
        .iter()
        .find(|c| c.type_ == "Applied")?;
    Some((condition.status.clone(), condition.reason.clone()))
}

/// Applies an `AppDeployment` and waits until its children exist in every child cluster.
async fn create_app(stage: &Stage, name: &str, image: &str, replicas: i32) {
    stage.apply(name, image, replicas).await;
    eventually("children everywhere", || {
        children_match(stage, &CHILDREN, name, image, replicas)
    })
    .await;
}

async fn delete_app(stage: &Stage, name: &str) {
    stage
        .apps()
        .await
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
}

/// Waits until the `AppDeployment` is gone (its finalizer removed).
async fn wait_gone(stage: &Stage, what: &str, name: &str) {
    eventually(what, || async {
        match stage.apps().await.get_opt(name).await.unwrap() {
            None => Ok(()),
            Some(app) => Err(format!(
                "still there: finalizers {:?}, status {:?}",
                app.finalizers(),
                app.status
            )),
        }
    })
    .await;
}

#[tokio::test]
async fn children_follow_their_parent_are_repaired_and_removed_with_it() {
    let stage = stage("scenario").await;
    let running = stage.operator(Some(Duration::from_secs(1))).await;
    let [a_ns, b_ns] = &stage.children;

    stage.apply("crd-a", "nginx:1.27", 2).await;
    eventually("Deployments in both clusters × both namespaces", || {
        children_match(&stage, &CHILDREN, "crd-a", "nginx:1.27", 2)
    })
    .await;
    eventually("both clusters Ready in the status", || async {
        let app = stage.apps().await.get("crd-a").await.unwrap();
        let states = CHILDREN.map(|c| cluster_state(&app, c).map(|s| s.0));
        match (states, ready(&app)) {
            ([Some(ClusterState::Applied), Some(ClusterState::Applied)], Some((status, _)))
                if status == "True" =>
            {
                Ok(())
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    stage.apply("crd-a", "nginx:1.28", 3).await;
    eventually("every child updated", || {
        children_match(&stage, &CHILDREN, "crd-a", "nginx:1.28", 3)
    })
    .await;

    let b: Api<Deployment> = Api::namespaced(stage.env.client("cluster-b").await.unwrap(), a_ns);
    let deleted_uid = b.get("crd-a").await.unwrap().uid();
    b.delete("crd-a", &DeleteParams::default()).await.unwrap();
    eventually("a child deleted by hand is recreated", || async {
        let recreated = child(&stage, Fleet::ClusterB, a_ns, "crd-a").await;
        match recreated {
            Some(d) if d.uid() != deleted_uid => Ok(()),
            other => Err(format!("{:?}", other.map(|d| d.uid()))),
        }
    })
    .await;

    let a: Api<Deployment> = Api::namespaced(stage.env.client("cluster-a").await.unwrap(), b_ns);
    a.patch(
        "crd-a",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({ "spec": { "replicas": 7 } })),
    )
    .await
    .unwrap();
    eventually("a child edited by hand is restored", || {
        children_match(&stage, &CHILDREN, "crd-a", "nginx:1.28", 3)
    })
    .await;

    delete_app(&stage, "crd-a").await;
    wait_gone(&stage, "the parent is gone, its finalizer removed", "crd-a").await;
    for cluster in CHILDREN {
        assert!(
            linked_children(&stage, cluster).await.is_empty(),
            "children left in {cluster}"
        );
    }

    // A parent deleted while the operator is not running: its children go at the next start.
    stage.apply("crd-b", "redis:7.4", 1).await;
    eventually("crd-b's children", || {
        children_match(&stage, &CHILDREN, "crd-b", "redis:7.4", 1)
    })
    .await;
    crate::support::stop(running).await;
    let remove_finalizers = serde_json::json!({ "metadata": { "finalizers": null } });
    stage
        .apps()
        .await
        .patch(
            "crd-b",
            &PatchParams::default(),
            &Patch::Merge(remove_finalizers),
        )
        .await
        .unwrap();
    delete_app(&stage, "crd-b").await;
    assert_eq!(
        linked_children(&stage, Fleet::ClusterA).await.len(),
        2,
        "the children outlive a parent deleted behind the operator's back"
    );

    let running = stage.operator(Some(Duration::from_secs(1))).await;
    eventually("the orphans are removed at start", || async {
        let left = linked_children(&stage, Fleet::ClusterA).await.len()
            + linked_children(&stage, Fleet::ClusterB).await.len();
        if left == 0 {
            Ok(())
        } else {
            Err(format!("{left} orphans left"))
        }
    })
    .await;
    crate::support::stop(running).await;
}

#[tokio::test]
async fn an_unreachable_cluster_holds_back_neither_the_other_nor_its_own_return() {
    let mut stage = stage("unreachable").await;
    let b = stage.relay(Fleet::ClusterB).await;
    let running = stage.operator(Some(Duration::from_secs(1))).await;
    b.refuse();

    stage.apply("crd-b", "redis:7.4", 1).await;
    eventually("cluster-a's children while cluster-b is down", || {
        children_match(&stage, &[Fleet::ClusterA], "crd-b", "redis:7.4", 1)
    })
    .await;
    eventually("the status names cluster-b unreachable", || async {
        let app = stage.apps().await.get("crd-b").await.unwrap();
        match (
            cluster_state(&app, Fleet::ClusterA),
            cluster_state(&app, Fleet::ClusterB),
            ready(&app),
        ) {
            (
                Some((ClusterState::Applied, _)),
                Some((ClusterState::Unreachable, message)),
                Some((status, _)),
            ) if message.contains("unreachable") && status == "False" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    b.open();
    eventually("cluster-b's children once it is back", || {
        children_match(&stage, &CHILDREN, "crd-b", "redis:7.4", 1)
    })
    .await;
    eventually("Ready again", || async {
        let app = stage.apps().await.get("crd-b").await.unwrap();
        match ready(&app) {
            Some((status, _)) if status == "True" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    crate::support::stop(running).await;
}

#[tokio::test]
async fn deletion_waits_for_an_unreachable_cluster_and_orphans_nothing() {
    let mut stage = stage("deletion").await;
    let b = stage.relay(Fleet::ClusterB).await;
    let running = stage.operator(Some(Duration::from_secs(1))).await;
    create_app(&stage, "crd-a", "nginx:1.27", 2).await;

    b.refuse();
    delete_app(&stage, "crd-a").await;
    eventually(
        "the status names the cluster that blocks the deletion",
        || async {
            let app = stage
                .apps()
                .await
                .get("crd-a")
                .await
                .map_err(|e| e.to_string())?;
            assert!(
                app.finalizers()
                    .iter()
                    .any(|f| f == "demo.kubeplex.dev/cleanup"),
                "the finalizer must stay"
            );
            match (cluster_state(&app, Fleet::ClusterB), ready(&app)) {
                (Some((ClusterState::Deleting, message)), Some((_, reason)))
                    if message.contains("unreachable") && reason == "DeletionBlocked" =>
                {
                    Ok(())
                }
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    assert!(
        linked_children(&stage, Fleet::ClusterA).await.is_empty(),
        "the reachable cluster is cleaned up at once"
    );

    b.open();
    wait_gone(&stage, "the parent goes once cluster-b is back", "crd-a").await;
    for cluster in CHILDREN {
        assert!(
            linked_children(&stage, cluster).await.is_empty(),
            "orphans left in {cluster}"
        );
    }
    crate::support::stop(running).await;
}

/// The fleet controller with the opt-in abandon policy (its namespaces replaced by the test's).
#[kubeplex::controller(
    crd = AppDeployment,
    contexts = [Fleet::Control],
    namespaces = ["crds"],
    owns(Deployment, contexts = [Fleet::ClusterA, Fleet::ClusterB], namespaces = ["namespace-a", "namespace-b"]),
    finalizer = "demo.kubeplex.dev/cleanup",
    error_requeue = "1s",
    abandon_unreachable_after = "3s",
)]
#[derive(Default)]
struct AbandoningDeployer(AppDeployer);

impl kubeplex::Reconcile for AbandoningDeployer {
    type Error = kubeplex_fleet::DeployError;
    async fn reconcile(
        &self,
        app: std::sync::Arc<AppDeployment>,
        cx: &kubeplex::Cx<Fleet>,
    ) -> Result<kubeplex::Action, Self::Error> {
        kubeplex::Reconcile::reconcile(&self.0, app, cx).await
    }
}

#[tokio::test]
async fn the_abandon_policy_gives_up_on_an_unreachable_cluster_and_says_so() {
    let mut stage = stage("abandon").await;
    let b = stage.relay(Fleet::ClusterB).await;
    let running = crate::support::started(stage.manager_with(AbandoningDeployer::default())).await;
    create_app(&stage, "crd-a", "nginx:1.27", 2).await;

    b.refuse();
    let deleted = std::time::Instant::now();
    delete_app(&stage, "crd-a").await;
    wait_gone(&stage, "the parent goes after the abandon timeout", "crd-a").await;
    // Not before the timeout: the deletion waits for the cluster that long (timers never fire early).
    assert!(
        deleted.elapsed() >= Duration::from_secs(3),
        "abandoned after {:?}, before abandon_unreachable_after (3s)",
        deleted.elapsed()
    );
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(stage.control().await, &stage.parents);
    let abandoned: Vec<_> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("ChildrenAbandoned"))
        .collect();
    assert_eq!(abandoned.len(), 1, "one event records the abandonment");
    assert!(
        abandoned[0]
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("cluster-b"),
        "{:?}",
        abandoned[0].note
    );

    b.open();
    // Stays abandoned: once the operator sees cluster-b again (its watches listed), it does not come back
    // for those children.
    let deadline = tokio::time::Instant::now() + WAIT;
    while !running.readiness().ready {
        assert!(
            tokio::time::Instant::now() < deadline,
            "cluster-b never ready again: {:?}",
            running.readiness()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        linked_children(&stage, Fleet::ClusterB).await.len(),
        2,
        "the abandoned children are left as recorded"
    );
    assert!(linked_children(&stage, Fleet::ClusterA).await.is_empty());
    crate::support::stop(running).await;
}
