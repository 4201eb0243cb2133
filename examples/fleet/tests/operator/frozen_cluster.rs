//! Frozen clusters (connections open, nothing answers), which the scenario's stopped ones (connection
//! refused, at once) do not show: a frozen child cluster delays only its own sync and status, bounded by the
//! per-context cap, and reaches its parents' status without an edit once it stops answering (and again once
//! it answers); and the orphan sweep, with the control cluster frozen at start, judges no parent before that
//! cluster's cache has listed. Each test's operator reaches the frozen cluster through a relay that holds
//! every byte (`Relay::cut`): the cluster freezes for that operator alone, on the suite's shared servers.

use std::time::{Duration, Instant};

use crate::support::{Stage, WAIT, eventually, stage};
use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kubeplex::{
    ClusterState, Context, Running, ownership::PARENT_UID_LABEL, readiness::ClusterReadiness,
};
use kubeplex_fleet::{AppDeployment, Fleet};

/// The runtime's per-context cap: a context that has not answered by then is unreachable.
const CAP: Duration = kubeplex::CLUSTER_TIMEOUT;
/// "Normal time": well below the cap, so a sync that waited for the frozen cluster cannot make it.
const NORMAL: Duration = Duration::from_secs(10);

/// The test's operator, started without waiting for its contexts (one may be frozen).
async fn start_operator(stage: &Stage) -> Running {
    tokio::time::timeout(WAIT, stage.manager().start())
        .await
        .expect("the manager starts in time")
        .unwrap()
}

/// The children of `name` in `cluster` (one per child namespace) with this image, or what is missing.
async fn children_with(
    stage: &Stage,
    cluster: Fleet,
    name: &str,
    image: &str,
) -> Result<Vec<Deployment>, String> {
    let mut found = Vec::new();
    for namespace in &stage.children {
        let client = stage.env.client(cluster.name()).await.unwrap();
        let api: Api<Deployment> = Api::namespaced(client, namespace);
        let child = api
            .get_opt(name)
            .await
            .map_err(|e| e.to_string())?
            .ok_or(format!("{cluster}/{namespace}/{name} missing"))?;
        let pod = child.spec.template.spec.as_ref();
        let actual = pod.and_then(|p| p.containers[0].image.clone());
        if actual.as_deref() != Some(image) {
            return Err(format!("{cluster}/{namespace}/{name} runs {actual:?}"));
        }
        found.push(child);
    }
    Ok(found)
}

/// Every Deployment of `cluster` in the stage's namespaces linked to a parent, as (namespace/name, UID).
async fn linked(stage: &Stage, cluster: Fleet) -> Vec<(String, String)> {
    let api: Api<Deployment> = Api::all(stage.env.client(cluster.name()).await.unwrap());
    let mut all: Vec<_> = api
        .list(&ListParams::default().labels(PARENT_UID_LABEL))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|d| stage.children.contains(&d.namespace().unwrap_or_default()))
        .map(|d| {
            let place = format!("{}/{}", d.namespace().unwrap_or_default(), d.name_any());
            (place, d.uid().unwrap_or_default())
        })
        .collect();
    all.sort();
    all
}

/// `cluster`'s state and message in the parent's status, if there is one.
fn state_of(app: &AppDeployment, cluster: Fleet) -> Option<(ClusterState, String)> {
    let status = app.status.as_ref()?.fleet.clusters.get(cluster.name())?;
    Some((status.state, status.message.clone().unwrap_or_default()))
}

fn ready_condition(app: &AppDeployment) -> Option<String> {
    let status = app.status.as_ref()?;
    let ready = status
        .fleet
        .conditions
        .iter()
        .find(|c| c.type_ == "Applied")?;
    Some(ready.status.clone())
}

/// Waits until the parent's status holds `wanted` for both child clusters; returns the parent.
async fn wait_status(
    stage: &Stage,
    what: &str,
    name: &str,
    wanted: impl Fn(Option<(ClusterState, String)>, Option<(ClusterState, String)>) -> bool,
) -> AppDeployment {
    let apps = stage.apps().await;
    eventually(what, || async {
        let app = apps.get(name).await.map_err(|e| e.to_string())?;
        let (a, b) = (
            state_of(&app, Fleet::ClusterA),
            state_of(&app, Fleet::ClusterB),
        );
        if wanted(a.clone(), b.clone()) {
            Ok(app)
        } else {
            Err(format!("cluster-a {a:?}, cluster-b {b:?}"))
        }
    })
    .await
}

fn is(state: ClusterState) -> impl Fn(&Option<(ClusterState, String)>) -> bool {
    move |s| s.as_ref().is_some_and(|(actual, _)| *actual == state)
}

#[tokio::test]
async fn a_frozen_child_cluster_delays_only_its_own_sync_and_status() {
    let mut stage = stage("frozen-child").await;
    let cluster_a = stage.relay(Fleet::ClusterA).await;
    let stage = &stage;
    let running = start_operator(stage).await;
    tokio::time::timeout(WAIT, running.wait_started())
        .await
        .expect("started in time")
        .unwrap();
    stage.apply("before", "nginx:1.27", 1).await;
    for cluster in [Fleet::ClusterA, Fleet::ClusterB] {
        eventually("children before the freeze", || {
            children_with(stage, cluster, "before", "nginx:1.27")
        })
        .await;
    }

    // cluster-a is the first child context of the plan: were the contexts synced one after the other,
    // cluster-b would wait for cluster-a's cap.
    cluster_a.cut();
    let applied = Instant::now();
    stage.apply("during", "redis:7.4", 1).await;
    eventually("cluster-b's children while cluster-a is frozen", || {
        children_with(stage, Fleet::ClusterB, "during", "redis:7.4")
    })
    .await;
    let children_after = applied.elapsed();
    wait_status(
        stage,
        "cluster-b's status while cluster-a is frozen",
        "during",
        |_, b| is(ClusterState::Applied)(&b),
    )
    .await;
    let status_after = applied.elapsed();
    assert!(
        children_after < NORMAL && status_after < NORMAL,
        "a frozen cluster-a held back cluster-b: its children after {children_after:?}, its status after \
         {status_after:?} (the cap is {CAP:?})"
    );

    // The cap: the frozen cluster's own outcome is written, as unreachable, once the cap has passed.
    let app = wait_status(
        stage,
        "the cap marks cluster-a unreachable",
        "during",
        |a, b| {
            is(ClusterState::Applied)(&b)
                && a.is_some_and(|(state, message)| {
                    state == ClusterState::Unreachable && message.contains("no answer within")
                })
        },
    )
    .await;
    let capped_after = applied.elapsed();
    assert!(
        capped_after >= CAP - Duration::from_secs(1),
        "cluster-a was given up after {capped_after:?}, before the {CAP:?} cap"
    );
    // The entry is cluster-a's: its message leaves the cluster to the key it is kept under.
    let message = state_of(&app, Fleet::ClusterA).unwrap().1;
    assert!(!message.contains("cluster-a"), "{message}");
    assert_eq!(ready_condition(&app).as_deref(), Some("False"));

    cluster_a.open();
    for cluster in [Fleet::ClusterA, Fleet::ClusterB] {
        eventually("every child once cluster-a answers again", || {
            children_with(stage, cluster, "during", "redis:7.4")
        })
        .await;
    }
    for name in ["before", "during"] {
        let app = wait_status(stage, "both clusters Ready again", name, |a, b| {
            is(ClusterState::Applied)(&a) && is(ClusterState::Applied)(&b)
        })
        .await;
        assert_eq!(ready_condition(&app).as_deref(), Some("True"), "{name}");
    }
    crate::support::stop(running).await;
}

/// Pings of the test whose cluster freezes with no edit anywhere: a freeze is seen within seconds.
const PING: Duration = Duration::from_secs(1);

#[tokio::test]
async fn a_child_cluster_that_freezes_reaches_its_parents_status_without_an_edit() {
    let mut stage = stage("frozen-again").await;
    let cluster_a = stage.relay(Fleet::ClusterA).await;
    let stage = &stage;
    let running = stage.operator(Some(PING)).await;
    stage.apply("before", "nginx:1.27", 1).await;
    wait_status(stage, "both clusters applied", "before", |a, b| {
        is(ClusterState::Applied)(&a) && is(ClusterState::Applied)(&b)
    })
    .await;

    // Once cluster-a stops answering its pings, its parents are reconciled and their status says so; once
    // it answers again, they read Ready again. Its readiness comes back with its next ping, which may be
    // after the status: the freeze waits for it.
    let readiness_is = |wanted: bool| {
        let running = &running;
        move || async move {
            let status = running
                .readiness()
                .clusters
                .get("cluster-a")
                .map(|c| c.status);
            match (status == Some(ClusterReadiness::Ready)) == wanted {
                true => Ok(()),
                false => Err(format!("{status:?}")),
            }
        }
    };
    eventually("cluster-a ready before the freeze", readiness_is(true)).await;
    cluster_a.cut();
    eventually("cluster-a not ready once frozen", readiness_is(false)).await;
    let app = wait_status(
        stage,
        "cluster-a unreachable in the status of a parent nobody edited",
        "before",
        |a, b| is(ClusterState::Applied)(&b) && is(ClusterState::Unreachable)(&a),
    )
    .await;
    assert_eq!(ready_condition(&app).as_deref(), Some("False"));
    cluster_a.open();
    let app = wait_status(
        stage,
        "cluster-a Ready again, still without an edit",
        "before",
        |a, b| is(ClusterState::Applied)(&a) && is(ClusterState::Applied)(&b),
    )
    .await;
    assert_eq!(ready_condition(&app).as_deref(), Some("True"));
    crate::support::stop(running).await;
}

#[tokio::test]
async fn the_orphan_sweep_judges_no_parent_before_the_control_cluster_has_listed() {
    let mut stage = stage("frozen-control").await;
    let control = stage.relay(Fleet::Control).await;
    let stage = &stage;
    let running = start_operator(stage).await;
    tokio::time::timeout(WAIT, running.wait_started())
        .await
        .expect("started in time")
        .unwrap();
    stage.apply("kept", "nginx:1.27", 1).await;
    stage.apply("gone", "redis:7.4", 1).await;
    for cluster in [Fleet::ClusterA, Fleet::ClusterB] {
        eventually("kept's children", || {
            children_with(stage, cluster, "kept", "nginx:1.27")
        })
        .await;
        eventually("gone's children", || {
            children_with(stage, cluster, "gone", "redis:7.4")
        })
        .await;
    }
    let parents = stage.apps().await;
    let gone_uid = parents.get("gone").await.unwrap().uid().unwrap();
    crate::support::stop(running).await;

    // "gone" is deleted while the operator is not running: its children are orphans now.
    let remove_finalizers = serde_json::json!({ "metadata": { "finalizers": null } });
    parents
        .patch(
            "gone",
            &PatchParams::default(),
            &Patch::Merge(remove_finalizers),
        )
        .await
        .unwrap();
    parents.delete("gone", &Default::default()).await.unwrap();
    eventually("gone is gone", || async {
        match parents.get_opt("gone").await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let before = [
        linked(stage, Fleet::ClusterA).await,
        linked(stage, Fleet::ClusterB).await,
    ];
    assert_eq!([before[0].len(), before[1].len()], [4, 4], "{before:?}");

    // The operator starts with the control cluster frozen: the parents' cache cannot list.
    control.cut();
    let running = start_operator(stage).await;
    eventually("the child clusters' watches have listed", || async {
        let report = running.readiness();
        let status = |c: Fleet| report.clusters.get(c.name()).map(|r| r.status);
        match [Fleet::Control, Fleet::ClusterA, Fleet::ClusterB].map(status) {
            [
                Some(control),
                Some(ClusterReadiness::Ready),
                Some(ClusterReadiness::Ready),
            ] if control != ClusterReadiness::Ready => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    // Nothing to wait for here: a sweep that judged the empty parent cache deletes at once, once the child
    // caches have listed (as they have), so every child must still be there throughout this window.
    let window = Instant::now();
    while window.elapsed() < Duration::from_secs(3) {
        let now = [
            linked(stage, Fleet::ClusterA).await,
            linked(stage, Fleet::ClusterB).await,
        ];
        assert_eq!(
            now, before,
            "a child was deleted while its parent's cache had not listed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    control.open();
    let gone_children = ListParams::default().labels(&format!("{PARENT_UID_LABEL}={gone_uid}"));
    for cluster in [Fleet::ClusterA, Fleet::ClusterB] {
        let api: Api<Deployment> = Api::all(stage.env.client(cluster.name()).await.unwrap());
        eventually("the genuine orphans are removed", || async {
            let left = api.list(&gone_children).await.unwrap().items.len();
            if left == 0 {
                Ok(())
            } else {
                Err(format!("{left} orphans left in {cluster}"))
            }
        })
        .await;
    }
    tokio::time::timeout(WAIT, running.wait_started())
        .await
        .expect("started once control answers")
        .unwrap();
    for (cluster, before) in [Fleet::ClusterA, Fleet::ClusterB].into_iter().zip(before) {
        let kept: Vec<_> = before
            .into_iter()
            .filter(|(place, _)| place.ends_with("/kept"))
            .collect();
        assert_eq!(
            linked(stage, cluster).await,
            kept,
            "in {cluster}, kept's children are the very same objects (never deleted and recreated), and \
             only they are left"
        );
    }
    crate::support::stop(running).await;
}
