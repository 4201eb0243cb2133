//! The built-in rules of the kinds other than Deployments' and Jobs', on real servers; and a Deployment's
//! status as a real Deployment controller writes it.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service};
use kubeplex::health::Health;

use super::parent::{Others, RealController, WorkloadSpec};
use super::scene::{Scene, health, ready};
use super::{clusters, env};

#[tokio::test]
async fn stateful_daemon_and_replica_sets_claims_and_load_balancers_follow_their_rules() {
    let env = env().await;
    let spec = WorkloadSpec {
        stateful_sets: vec!["db".into()],
        daemon_sets: vec!["agent".into()],
        replica_sets: vec!["cache".into()],
        claims: vec!["data".into()],
        load_balancers: vec!["front".into()],
        ..WorkloadSpec::default()
    };
    let scene = Scene::start(env, Others, "health-others", "stack", spec).await;
    // No controller has written yet: the sets are not observed, the claim not bound, the Service has no
    // ingress.
    scene
        .wait("none healthy", |p| {
            health(p)
                .is_some_and(|h| (h.state, h.healthy, h.progressing) == (Health::Progressing, 0, 5))
        })
        .await;

    // Each kind's controller reports every replica, pod, binding and ingress.
    let set_ok = serde_json::json!({ "observedGeneration": null, "replicas": 3, "readyReplicas": 3,
        "currentReplicas": 3, "updatedReplicas": 3, "availableReplicas": 3 });
    let daemons_ok = serde_json::json!({ "observedGeneration": null, "currentNumberScheduled": 2,
        "numberMisscheduled": 0, "desiredNumberScheduled": 2, "numberReady": 2, "updatedNumberScheduled": 2,
        "numberAvailable": 2 });
    let replicas_ok = serde_json::json!({ "observedGeneration": null, "replicas": 3, "fullyLabeledReplicas": 3,
        "readyReplicas": 3, "availableReplicas": 3, "conditions": null });
    let bound = serde_json::json!({ "phase": "Bound" });
    let ingress = serde_json::json!({ "loadBalancer": { "ingress": [{ "ip": "192.0.2.10", "ipMode": "VIP" }] } });
    scene.play::<StatefulSet>("db", set_ok.clone()).await;
    scene.play::<DaemonSet>("agent", daemons_ok.clone()).await;
    scene.play::<ReplicaSet>("cache", replicas_ok.clone()).await;
    scene
        .play::<PersistentVolumeClaim>("data", bound.clone())
        .await;
    scene.play::<Service>("front", ingress.clone()).await;
    let parent = scene.wait_ready("every child healthy").await;
    assert_eq!(
        health(&parent).map(|h| (h.state, h.healthy)),
        Some((Health::Healthy, 5))
    );

    // One child at a time falls back, reads as its rule says, and recovers.
    let set_short = serde_json::json!({ "observedGeneration": null, "replicas": 3, "readyReplicas": 1,
        "currentReplicas": 3, "updatedReplicas": 3, "availableReplicas": 1 });
    scene.play::<StatefulSet>("db", set_short).await;
    let db = "health-others/db: 1/3 replicas ready";
    scene
        .wait_health("db short", Health::Progressing, Some(db))
        .await;
    scene.play::<StatefulSet>("db", set_ok).await;
    scene.wait_health("db back", Health::Healthy, None).await;

    let daemons_short = serde_json::json!({ "observedGeneration": null, "currentNumberScheduled": 2,
        "numberMisscheduled": 0, "desiredNumberScheduled": 2, "numberReady": 1, "updatedNumberScheduled": 2,
        "numberAvailable": 1 });
    scene.play::<DaemonSet>("agent", daemons_short).await;
    let agent = "health-others/agent: 1/2 pods available";
    scene
        .wait_health("agent short", Health::Progressing, Some(agent))
        .await;
    scene.play::<DaemonSet>("agent", daemons_ok).await;
    scene.wait_health("agent back", Health::Healthy, None).await;

    let failing = serde_json::json!({ "observedGeneration": null, "replicas": 3, "fullyLabeledReplicas": 3,
        "readyReplicas": 3, "availableReplicas": 3,
        "conditions": [{ "type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
                         "message": "exceeded quota" }] });
    scene.play::<ReplicaSet>("cache", failing).await;
    let cache = "health-others/cache: FailedCreate: exceeded quota";
    scene
        .wait_health("cache failing", Health::Degraded, Some(cache))
        .await;
    scene.play::<ReplicaSet>("cache", replicas_ok).await;
    scene.wait_health("cache back", Health::Healthy, None).await;

    scene
        .play::<PersistentVolumeClaim>("data", serde_json::json!({ "phase": "Lost" }))
        .await;
    let data = "health-others/data: claim lost: its volume is gone";
    let parent = scene
        .wait_health("data lost", Health::Degraded, Some(data))
        .await;
    assert_eq!(ready(&parent), ("False", "ChildrenDegraded"));
    scene.play::<PersistentVolumeClaim>("data", bound).await;
    scene.wait_health("data bound", Health::Healthy, None).await;

    let no_ingress = serde_json::json!({ "loadBalancer": { "ingress": null } });
    scene.play::<Service>("front", no_ingress).await;
    let front = "health-others/front: waiting for a load balancer ingress";
    scene
        .wait_health("front waits", Health::Progressing, Some(front))
        .await;
    scene.play::<Service>("front", ingress).await;
    scene.wait_ready("front back").await;
    scene.stop().await;
}

#[tokio::test]
async fn a_real_deployment_controllers_status_reads_as_a_rollout_in_progress() {
    // Clusters of their own: cluster-a runs kube-controller-manager, whose Deployment controller writes
    // the status (observedGeneration, replica counts, the Progressing and Available conditions). With no
    // scheduler or kubelet its pods never start, as a rollout whose pods are still starting.
    let env = clusters()
        .controller_manager("cluster-a")
        .start()
        .await
        .unwrap();
    let spec = WorkloadSpec {
        deployments: vec!["web".into()],
        ..WorkloadSpec::default()
    };
    let scene = Scene::start(&env, RealController, "health-real", "live", spec).await;
    let parent = scene
        .wait_health(
            "observed, rolling out",
            Health::Progressing,
            Some("health-real/web: 0/3 replicas available"),
        )
        .await;
    assert_eq!(ready(&parent), ("False", "ChildrenNotHealthy"));
    // What the controller wrote: the generation observed, Available false while Progressing is true.
    let web = scene
        .children::<Deployment>()
        .await
        .get("web")
        .await
        .unwrap();
    let status = web.status.expect("the controller's status");
    assert_eq!(status.observed_generation, web.metadata.generation);
    let conditions = status.conditions.unwrap_or_default();
    let of = |type_: &str| {
        let found = conditions
            .iter()
            .find(|c| c.type_.as_deref() == Some(type_));
        found.map(|c| {
            (
                c.status.as_deref().unwrap_or_default(),
                c.reason.as_deref().unwrap_or_default(),
            )
        })
    };
    assert_eq!(
        of("Available"),
        Some(("False", "MinimumReplicasUnavailable"))
    );
    assert!(
        of("Progressing").is_some_and(|(status, _)| status == "True"),
        "{conditions:?}"
    );
    scene.stop().await;
}
