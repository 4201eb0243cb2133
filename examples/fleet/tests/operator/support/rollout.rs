//! What the rollout tests read and wait for: each cluster's images, the parent's `status.rollout` and its
//! rollout Events, and the workload played in place of a kubelet.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams};
use kubeplex::Context as _;
use kubeplex_fleet::demo::kubelet::{Played, image_of, play};
use kubeplex_fleet::{Fleet, RolloutStatus};

use super::{Stage, eventually};

/// The image of `name`'s Deployment in each child namespace of `cluster` (`-` where there is none).
pub async fn images(stage: &Stage, cluster: Fleet, name: &str) -> Vec<String> {
    let client = stage.env.client(cluster.name()).await.unwrap();
    let mut images = Vec::new();
    for namespace in &stage.children {
        let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
        let deployment = api.get_opt(name).await.unwrap();
        images.push(
            deployment
                .and_then(|d| image_of(&d))
                .unwrap_or_else(|| "-".into()),
        );
    }
    images
}

/// Waits until every Deployment of `name` in `cluster` runs `image`.
pub async fn wait_images(stage: &Stage, cluster: Fleet, name: &str, image: &str) {
    let what = format!("{name}'s Deployments in {cluster} run {image}");
    eventually(&what, async || {
        let images = images(stage, cluster, name).await;
        if images.iter().all(|i| i == image) {
            Ok(())
        } else {
            Err(format!("{images:?}"))
        }
    })
    .await;
}

/// The parent's `status.rollout`.
pub async fn rollout_status(stage: &Stage, name: &str) -> Option<RolloutStatus> {
    stage.apps().await.get(name).await.unwrap().status?.rollout
}

/// Waits until the parent's `status.rollout` satisfies `done`; returns it.
pub async fn wait_rollout(
    stage: &Stage,
    name: &str,
    what: &str,
    done: impl Fn(&RolloutStatus) -> bool,
) -> RolloutStatus {
    eventually(
        &format!("{name}'s rollout: {what}"),
        async || match rollout_status(stage, name).await {
            Some(status) if done(&status) => Ok(status),
            other => Err(format!("{other:?}")),
        },
    )
    .await
}

/// Plays every Deployment of `name` in `cluster` as `played` (see `demo::kubelet`).
pub async fn play_cluster(stage: &Stage, cluster: Fleet, name: &str, played: Played) {
    let client = stage.env.client(cluster.name()).await.unwrap();
    for namespace in &stage.children {
        play(&client, namespace, name, played).await.unwrap();
    }
}

/// The rollout's Events on the parent `name` (reasons `Rollout…`), oldest first, as (reason, note, series
/// count).
pub async fn rollout_events(stage: &Stage, name: &str) -> Vec<(String, String, i32)> {
    let api: Api<Event> = Api::namespaced(stage.control().await, &stage.parents);
    let mut events: Vec<Event> = (api.list(&ListParams::default()).await.unwrap().items)
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter(|e| {
            e.reason
                .as_deref()
                .is_some_and(|r| r.starts_with("Rollout"))
        })
        .collect();
    events.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
    (events.into_iter())
        .map(|e| {
            let count = e.series.as_ref().map_or(1, |s| s.count);
            let reason = e.reason.unwrap_or_default();
            (reason, e.note.unwrap_or_default(), count)
        })
        .collect()
}

/// Waits until the parent `name` has rollout Events with these reasons, in this order; returns them.
pub async fn wait_rollout_events(
    stage: &Stage,
    name: &str,
    reasons: &[&str],
) -> Vec<(String, String, i32)> {
    eventually(
        &format!("{name}'s rollout events {reasons:?}"),
        async || {
            let events = rollout_events(stage, name).await;
            if events
                .iter()
                .map(|(r, _, _)| r.as_str())
                .eq(reasons.iter().copied())
            {
                Ok(events)
            } else {
                Err(format!("{events:#?}"))
            }
        },
    )
    .await
}

/// Deletes `name`'s Deployments in every child namespace of `cluster`, as a person would by hand; returns
/// their UIDs.
pub async fn delete_deployments(stage: &Stage, cluster: Fleet, name: &str) -> Vec<String> {
    let client = stage.env.client(cluster.name()).await.unwrap();
    let mut uids = Vec::new();
    for namespace in &stage.children {
        let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
        let gone = api.delete(name, &DeleteParams::default()).await.unwrap();
        let uid = gone.either(|d| d.metadata.uid, |s| s.details.map(|d| d.uid));
        uids.push(uid.unwrap_or_default());
    }
    uids
}

/// Waits until `name`'s Deployments in `cluster` are there again, none of them with one of these `uids`;
/// returns their images.
pub async fn wait_recreated(
    stage: &Stage,
    cluster: Fleet,
    name: &str,
    uids: &[String],
) -> Vec<String> {
    let client = stage.env.client(cluster.name()).await.unwrap();
    eventually(
        &format!("{name}'s Deployments in {cluster} re-created"),
        async || {
            let mut images = Vec::new();
            for namespace in &stage.children {
                let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
                match api.get_opt(name).await.unwrap() {
                    Some(d) if !uids.contains(d.metadata.uid.as_ref().unwrap()) => {
                        images.push(image_of(&d).unwrap_or_default());
                    }
                    other => {
                        return Err(format!("{namespace}: {:?}", other.map(|d| d.metadata.uid)));
                    }
                }
            }
            Ok(images)
        },
    )
    .await
}
