//! A progressive rollout on real clusters: a changed image goes to cluster-a first and to cluster-b only
//! once cluster-a runs it healthily; a `Degraded` cluster-a halts it, and the parent's status says where and
//! why, and Events tell the halt, the resumption and the completion once each; a cluster the rollout has not
//! reached keeps its image even when its Deployments are deleted by hand; the rollout goes on once
//! cluster-a recovers; without `spec.rollout` again, a new image goes everywhere. The
//! clusters run no kubelet: the test plays the workload by writing the Deployments' status subresource as
//! the Deployment controller would.

use crate::support::rollout::{
    delete_deployments, images, play_cluster, rollout_status, wait_images, wait_recreated,
    wait_rollout, wait_rollout_events,
};
use crate::support::{eventually, stage, stop};
use kubeplex_fleet::RolloutPhase;
use kubeplex_fleet::demo::kubelet::Played;
use kubeplex_fleet::demo::rollout::apply_with_rollout;
use kubeplex_fleet::{Fleet, RolloutStatus};

const NAME: &str = "web";
const ORDER: [&str; 2] = ["cluster-a", "cluster-b"];

/// The rollout waits for `cluster`, for this reason.
fn waits_for(status: &RolloutStatus, phase: RolloutPhase, cluster: &str, why: &str) -> bool {
    status.phase == phase
        && status.cluster.as_deref() == Some(cluster)
        && status.message.contains(why)
}

#[tokio::test]
async fn the_rollout_waits_for_cluster_a_halts_on_degraded_and_resumes_when_it_recovers() {
    let stage = stage("rollout").await;
    let running = stage.operator(None).await;
    let control = stage.control().await;
    let (parents, [a_ns, _]) = (&stage.parents, &stage.children);
    let old = |cluster| images(&stage, cluster, NAME);

    // A new parent goes to both clusters at once; both run it.
    apply_with_rollout(&control, parents, NAME, "nginx:1.27", 2, &ORDER)
        .await
        .unwrap();
    for cluster in [Fleet::ClusterA, Fleet::ClusterB] {
        wait_images(&stage, cluster, NAME, "nginx:1.27").await;
        play_cluster(&stage, cluster, NAME, Played::Healthy).await;
    }
    wait_rollout(&stage, NAME, "complete with nginx:1.27", |s| {
        s.phase == RolloutPhase::Complete && s.image == "nginx:1.27"
    })
    .await;

    // A new image: cluster-a gets it, and the rollout waits for cluster-a's Deployments, which the
    // reconcile has seen with the new image (their Deployment controller has not observed it yet).
    apply_with_rollout(&control, parents, NAME, "nginx:1.28", 2, &ORDER)
        .await
        .unwrap();
    wait_images(&stage, Fleet::ClusterA, NAME, "nginx:1.28").await;
    let status = wait_rollout(&stage, NAME, "waiting for cluster-a", |s| {
        waits_for(s, RolloutPhase::Progressing, "cluster-a", "not observed")
    })
    .await;
    assert_eq!(
        status.message,
        format!(
            "waiting for cluster-a: {a_ns}/web Progressing: generation 2 not observed yet (observed 1); \
             cluster-b not updated"
        )
    );
    assert_eq!(old(Fleet::ClusterB).await, ["nginx:1.27", "nginx:1.27"]);

    // cluster-a runs it: cluster-b gets it.
    play_cluster(&stage, Fleet::ClusterA, NAME, Played::Healthy).await;
    wait_images(&stage, Fleet::ClusterB, NAME, "nginx:1.28").await;
    wait_rollout(&stage, NAME, "complete with nginx:1.28", |s| {
        s.phase == RolloutPhase::Complete && s.image == "nginx:1.28" && s.cluster.is_none()
    })
    .await;
    play_cluster(&stage, Fleet::ClusterB, NAME, Played::Healthy).await;
    let events = wait_rollout_events(&stage, NAME, &["RolloutComplete"]).await;
    assert_eq!(
        events[0].1,
        "rollout of nginx:1.28: nginx:1.28 given to every cluster"
    );

    // Another image, and cluster-a's Deployments go Degraded with it: the rollout halts there.
    apply_with_rollout(&control, parents, NAME, "nginx:1.29", 2, &ORDER)
        .await
        .unwrap();
    wait_images(&stage, Fleet::ClusterA, NAME, "nginx:1.29").await;
    play_cluster(&stage, Fleet::ClusterA, NAME, Played::Degraded).await;
    let status = wait_rollout(&stage, NAME, "halted at cluster-a", |s| {
        waits_for(s, RolloutPhase::Halted, "cluster-a", "Degraded")
    })
    .await;
    assert_eq!(
        status.message,
        format!(
            "halted at cluster-a: {a_ns}/web Degraded: progress deadline exceeded: ReplicaSet \"web\" has \
             timed out progressing.; cluster-b not updated"
        )
    );
    assert_eq!(status.image, "nginx:1.29");
    assert_eq!(old(Fleet::ClusterB).await, ["nginx:1.28", "nginx:1.28"]);
    let events = wait_rollout_events(&stage, NAME, &["RolloutComplete", "RolloutHalted"]).await;
    assert_eq!(
        events[1].1,
        format!("rollout of nginx:1.29: {}", status.message)
    );

    // cluster-b's Deployments are deleted by hand while it waits and the operator is away: the restarted
    // operator's cache has none there, and they come back with the image cluster-b was last given, not the
    // one held back. (Deleted while it runs, one at a time, the other one's annotation would tell.)
    stop(running).await;
    let uids = delete_deployments(&stage, Fleet::ClusterB, NAME).await;
    let running = stage.operator(None).await;
    let recreated = wait_recreated(&stage, Fleet::ClusterB, NAME, &uids).await;
    assert_eq!(recreated, ["nginx:1.28", "nginx:1.28"]);
    let status = rollout_status(&stage, NAME).await.unwrap();
    assert_eq!(
        (
            status.phase,
            status.clusters.get("cluster-b").map(String::as_str)
        ),
        (RolloutPhase::Halted, Some("nginx:1.28"))
    );

    // cluster-a recovers: the rollout resumes, and cluster-b gets the image.
    play_cluster(&stage, Fleet::ClusterA, NAME, Played::Healthy).await;
    wait_images(&stage, Fleet::ClusterB, NAME, "nginx:1.29").await;
    wait_rollout(&stage, NAME, "complete with nginx:1.29", |s| {
        s.phase == RolloutPhase::Complete && s.image == "nginx:1.29"
    })
    .await;
    assert_eq!(old(Fleet::ClusterA).await, ["nginx:1.29", "nginx:1.29"]);
    // Each transition told once, in one Event each: no repeats while it stayed halted.
    let told = [
        "RolloutComplete",
        "RolloutHalted",
        "RolloutResumed",
        "RolloutComplete",
    ];
    let events = wait_rollout_events(&stage, NAME, &told).await;
    assert!(
        events.iter().all(|(_, _, count)| *count == 1),
        "{events:#?}"
    );
    assert!(
        events[2]
            .1
            .starts_with("rollout of nginx:1.29: cluster-a is no longer Degraded; "),
        "{events:#?}"
    );

    // Without spec.rollout, a new image goes everywhere and status.rollout is gone.
    stage.apply(NAME, "nginx:1.30", 2).await;
    for cluster in [Fleet::ClusterA, Fleet::ClusterB] {
        wait_images(&stage, cluster, NAME, "nginx:1.30").await;
    }
    eventually("status.rollout removed", async || {
        match rollout_status(&stage, NAME).await {
            None => Ok(()),
            Some(status) => Err(format!("{status:?}")),
        }
    })
    .await;

    stop(running).await;
}
