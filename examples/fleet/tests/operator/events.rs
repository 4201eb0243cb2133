//! Kubernetes Events on the parent, on real clusters: its children created and pruned in the child clusters
//! (naming the cluster), a deletion blocked by a stopped cluster and unblocked when it returns, each told
//! once: retries of the blocked deletion (counted in cluster-a's audit log, where each one lists the
//! parent's children) add no Event object. cluster-b is stopped for the operator alone, behind a relay that
//! refuses its connections.

use std::time::Duration;

use crate::support::{Stage, eventually, stage};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kubeplex::{ClusterState, Context};
use kubeplex_fleet::Fleet;

const NAME: &str = "evented";
/// Retries of the blocked deletion the test waits for.
const RETRIES: usize = 3;

/// The Events about the parent with this UID, as (reason, note, series count).
async fn events_of(stage: &Stage, uid: &str) -> Vec<(String, String, i32)> {
    let api: Api<Event> = Api::namespaced(stage.control().await, &stage.parents);
    let mut events: Vec<Event> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid))
        .collect();
    events.sort_by_key(|e| e.creation_timestamp());
    events
        .into_iter()
        .map(|e| {
            let count = e.series.as_ref().map_or(1, |s| s.count);
            (
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default(),
                count,
            )
        })
        .collect()
}

fn with_reason<'a>(
    events: &'a [(String, String, i32)],
    reason: &str,
) -> Vec<&'a (String, String, i32)> {
    events.iter().filter(|(r, _, _)| r == reason).collect()
}

/// Waits until the parent has `count` Events with `reason`; returns all its Events.
async fn wait_events(
    stage: &Stage,
    uid: &str,
    reason: &str,
    count: usize,
) -> Vec<(String, String, i32)> {
    eventually(&format!("{count} {reason} event(s)"), || async {
        let events = events_of(stage, uid).await;
        if with_reason(&events, reason).len() >= count {
            Ok(events)
        } else {
            Err(format!("{events:#?}"))
        }
    })
    .await
}

/// How often cluster-a was asked for the parent's children by label, in the test's child namespaces: each
/// attempt to clean up after the deleted parent lists them there.
fn child_lists(stage: &Stage, uid: &str) -> usize {
    let audited = stage.env.audit_events(Fleet::ClusterA.name()).unwrap();
    audited
        .iter()
        .filter(|e| e["stage"] == "ResponseComplete" && e["verb"] == "list")
        .filter(|e| e["objectRef"]["resource"] == "deployments")
        .filter(|e| {
            let namespace = e["objectRef"]["namespace"].as_str();
            stage.children.iter().any(|n| namespace == Some(n.as_str()))
        })
        .filter(|e| {
            e["requestURI"]
                .as_str()
                .is_some_and(|uri| uri.contains(uid))
        })
        .count()
}

#[tokio::test]
async fn children_and_deletion_changes_are_told_on_the_parent_once_each() {
    let mut stage = stage("events").await;
    let relay = stage.relay(Fleet::ClusterB).await;
    let running = stage.operator(Some(Duration::from_secs(1))).await;
    let apps = stage.apps().await;
    let [a_ns, b_ns] = &stage.children;

    // Created: one event per child cluster, naming it and its children.
    stage.apply(NAME, "nginx:1.27", 1).await;
    let uid = eventually("the parent is Ready", || async {
        let app = apps.get(NAME).await.map_err(|e| e.to_string())?;
        let clusters = app.status.as_ref().map(|s| &s.fleet.clusters);
        let ready = clusters.is_some_and(|c| {
            [Fleet::ClusterA, Fleet::ClusterB].iter().all(|cluster| {
                c.get(cluster.name()).is_some_and(|s| {
                    s.state == ClusterState::Applied && s.children == stage.children.len() as u32
                })
            })
        });
        ready
            .then(|| app.uid().unwrap())
            .ok_or(format!("{:?}", app.status))
    })
    .await;
    let events = wait_events(&stage, &uid, "ChildCreated", 2).await;
    for cluster in ["cluster-a", "cluster-b"] {
        assert!(
            with_reason(&events, "ChildCreated")
                .iter()
                .any(|(_, note, _)| {
                    note.contains(&format!("in {cluster}:"))
                        && (stage.children)
                            .iter()
                            .all(|ns| note.contains(&format!("Deployment {ns}/{NAME}")))
                }),
            "{events:#?}"
        );
    }

    // Pruned: the parent narrows its namespaces; the children left in the first are unchanged, so not told.
    let narrow = serde_json::json!({ "spec": { "namespaces": [a_ns] } });
    apps.patch(NAME, &PatchParams::default(), &Patch::Merge(&narrow))
        .await
        .unwrap();
    let events = wait_events(&stage, &uid, "ChildPruned", 2).await;
    for cluster in ["cluster-a", "cluster-b"] {
        let wanted = format!("in {cluster}: Deployment {b_ns}/{NAME}");
        assert!(
            with_reason(&events, "ChildPruned")
                .iter()
                .any(|(_, note, _)| note.contains(&wanted)),
            "{wanted}: {events:#?}"
        );
    }
    assert!(
        with_reason(&events, "ChildUpdated").is_empty(),
        "an unchanged child was told as updated: {events:#?}"
    );

    // Deletion blocked by a stopped cluster: told once, however often it is retried.
    relay.refuse();
    apps.delete(NAME, &Default::default()).await.unwrap();
    let events = wait_events(&stage, &uid, "DeletionBlocked", 1).await;
    let (_, note, _) = with_reason(&events, "DeletionBlocked")[0];
    assert!(note.contains("cluster-b"), "{note}");
    let lists = child_lists(&stage, &uid);
    for retry in 0..RETRIES {
        // An annotation change reconciles the parent at once (besides the retries every 5 s).
        let touch = serde_json::json!({ "metadata": { "annotations": { "test.kubeplex.dev/touch": retry.to_string() } } });
        apps.patch(NAME, &PatchParams::default(), &Patch::Merge(&touch))
            .await
            .unwrap();
        let seen = lists + (retry + 1) * stage.children.len();
        eventually("another attempt at the blocked deletion", || async {
            let now = child_lists(&stage, &uid);
            (now >= seen)
                .then_some(())
                .ok_or(format!("{now} of {seen} child lists"))
        })
        .await;
    }
    let app = apps.get(NAME).await.unwrap();
    let b = &app.status.as_ref().unwrap().fleet.clusters[Fleet::ClusterB.name()];
    assert_eq!(b.state, ClusterState::Deleting, "{b:?}");
    let events = events_of(&stage, &uid).await;
    assert_eq!(
        with_reason(&events, "DeletionBlocked").len(),
        1,
        "one Event object for the blocked deletion after {RETRIES} retries and more: {events:#?}"
    );

    // Unblocked when cluster-b returns; the parent goes.
    relay.open();
    eventually("the parent is gone", || async {
        match apps.get_opt(NAME).await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let events = wait_events(&stage, &uid, "DeletionUnblocked", 1).await;
    assert_eq!(
        with_reason(&events, "DeletionBlocked").len(),
        1,
        "{events:#?}"
    );
    assert_eq!(
        with_reason(&events, "DeletionUnblocked").len(),
        1,
        "{events:#?}"
    );
    crate::support::stop(running).await;
}
