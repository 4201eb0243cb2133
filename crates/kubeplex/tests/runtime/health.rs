//! Children's health on real clusters. The test clusters run no kubelet and no controller-manager, so each
//! test plays the workload: it writes the child's status subresource as the cluster's controllers would
//! (`observedGeneration`, replica counts, Job and kstatus conditions), and the parent's status, its
//! `Applied` and `Ready` conditions, its Events and what `cx.children` reads follow within the health
//! debounce.

mod api_kinds;
mod kinds;
pub mod parent;
pub mod scene;

use crate::support::polling;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::CustomResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kubeplex::health::Health;
use kubeplex_testenv::{TestEnv, TestEnvBuilder, eventually};
use parent::{
    Configs, Deployments, Jobs, SEEN_BY_CX, SuspendedJobs, Unreachable, Widget, Widgets, Workload,
    WorkloadSpec,
};
use scene::{Scene, condition, health, reads, ready};

/// The tests' clusters: the parents' kind in control, the custom child kind in cluster-a. A test that
/// stops a cluster or runs a controller manager starts clusters of its own from this.
fn clusters() -> TestEnvBuilder {
    TestEnv::builder()
        .clusters(["control", "cluster-a"])
        .crd("control", Workload::crd())
        .crd("cluster-a", Widget::crd())
}

/// The suite's clusters, with this module's kinds installed.
pub(crate) async fn env() -> &'static TestEnv {
    crate::support::clusters([("control", Workload::crd()), ("cluster-a", Widget::crd())]).await
}

#[tokio::test]
async fn a_deployment_goes_progressing_healthy_degraded_and_the_parent_follows() {
    let env = env().await;
    let spec = WorkloadSpec {
        deployments: vec!["web".into()],
        ..WorkloadSpec::default()
    };
    let scene = Scene::start(env, Deployments, "health-deployments", "shop", spec).await;
    let parent = scene
        .wait_health(
            "applied, no status yet",
            Health::Progressing,
            Some("health-deployments/web: not observed by its controller yet"),
        )
        .await;
    assert_eq!(condition(&parent, "Applied").unwrap().0, "True");
    assert_eq!(
        condition(&parent, "Ready").unwrap(),
        (
            "False".into(),
            "ChildrenNotHealthy".into(),
            "cluster-a: Progressing: 0/1 children healthy (health-deployments/web: not observed by its controller yet)"
                .into()
        )
    );

    // The Deployment controller's part: observed, every replica updated, none available yet.
    let rolling =
        serde_json::json!({ "observedGeneration": null, "replicas": 3, "updatedReplicas": 3 });
    scene.play::<Deployment>("web", rolling).await;
    scene
        .wait_health(
            "0/3 available",
            Health::Progressing,
            Some("health-deployments/web: 0/3 replicas available"),
        )
        .await;

    let available = serde_json::json!({
        "observedGeneration": null, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3,
        "conditions": [{ "type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                         "message": "Deployment has minimum availability." }],
    });
    scene.play::<Deployment>("web", available).await;
    let parent = scene.wait_ready("Ready=True").await;
    assert_eq!(
        health(&parent).map(|h| (h.state, h.healthy, h.worst.clone())),
        Some((Health::Healthy, 1, None))
    );
    assert_eq!(ready(&parent), ("True", "AllChildrenHealthy"));
    // The reconcile reads the same from its caches.
    eventually("cx.children sees web Healthy", polling(), async || {
        let seen = SEEN_BY_CX.lock().get("shop").cloned().unwrap_or_default();
        let healthy = [(
            "health-deployments/web".to_owned(),
            Health::Healthy,
            "3/3 replicas available".to_owned(),
        )];
        if seen == healthy {
            Ok(())
        } else {
            Err(format!("{seen:?}"))
        }
    })
    .await;

    let crashing = serde_json::json!({
        "observedGeneration": null, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 1, "availableReplicas": 1,
        "conditions": [{ "type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
                         "message": "Deployment does not have minimum availability." }],
    });
    scene.play::<Deployment>("web", crashing).await;
    let worst = "health-deployments/web: 1/3 replicas available: Deployment does not have minimum availability.";
    let parent = scene
        .wait_health("Degraded", Health::Degraded, Some(worst))
        .await;
    assert_eq!(ready(&parent), ("False", "ChildrenDegraded"));
    assert_eq!(
        condition(&parent, "Applied").unwrap().0,
        "True",
        "still applied"
    );

    // Told once as an Event on the parent, naming the cluster and the child.
    let events: Api<Event> = Api::namespaced(env.client("control").await.unwrap(), scene.namespace);
    let note = eventually("a ChildDegraded event", polling(), async || {
        let list = events.list(&ListParams::default()).await.unwrap();
        let found = list
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("ChildDegraded"));
        found.and_then(|e| e.note)
    })
    .await;
    assert_eq!(
        note,
        "cluster-a: child health-deployments/web is Degraded: 1/3 replicas available: Deployment does not have minimum availability."
    );
    scene.stop().await;
}

#[tokio::test]
async fn a_failed_job_is_degraded_with_its_reason() {
    let env = env().await;
    let spec = WorkloadSpec {
        jobs: vec!["migrate".into()],
        ..WorkloadSpec::default()
    };
    let scene = Scene::start(env, Jobs, "health-jobs", "db", spec).await;
    scene
        .wait_health(
            "running",
            Health::Progressing,
            Some("health-jobs/migrate: running: 0 active, 0 succeeded"),
        )
        .await;
    // As the Job controller writes a failure: FailureTarget first, then Failed.
    let now = "2026-01-01T00:00:00Z";
    let failed = |type_: &str| {
        serde_json::json!({ "type": type_, "status": "True", "reason": "BackoffLimitExceeded",
                            "message": "Job has reached the specified backoff limit",
                            "lastProbeTime": now, "lastTransitionTime": now })
    };
    let conditions = [failed("FailureTarget"), failed("Failed")];
    let status = serde_json::json!({ "startTime": now, "failed": 1, "conditions": conditions });
    scene.play::<Job>("migrate", status).await;
    let parent = scene
        .wait_health(
            "failed",
            Health::Degraded,
            Some("health-jobs/migrate: failed: Job has reached the specified backoff limit"),
        )
        .await;
    assert_eq!(ready(&parent), ("False", "ChildrenDegraded"));
    scene.stop().await;
}

#[tokio::test]
async fn a_suspended_job_is_suspended_and_one_being_deleted_is_terminating() {
    let env = env().await;
    let spec = WorkloadSpec {
        jobs: vec!["batch".into()],
        ..WorkloadSpec::default()
    };
    let scene = Scene::start(env, SuspendedJobs, "health-suspended", "nightly", spec).await;
    // As the Job controller writes a suspension.
    let now = "2026-01-01T00:00:00Z";
    let suspended = serde_json::json!({ "conditions": [{
        "type": "Suspended", "status": "True", "reason": "JobSuspended", "message": "Job suspended",
        "lastProbeTime": now, "lastTransitionTime": now,
    }] });
    scene.play::<Job>("batch", suspended).await;
    let parent = scene
        .wait_health(
            "suspended",
            Health::Suspended,
            Some("health-suspended/batch: suspended: 0 active, 0 succeeded"),
        )
        .await;
    assert_eq!(ready(&parent), ("False", "ChildrenSuspended"));

    // Deleted, kept by a finalizer: Terminating, naming it, whatever the Job's status says.
    let jobs: Api<Job> = scene.children().await;
    let hold = serde_json::json!({ "metadata": { "finalizers": ["example.com/hold"] } });
    jobs.patch("batch", &PatchParams::default(), &Patch::Merge(&hold))
        .await
        .unwrap();
    let background = kube::api::DeleteParams::background();
    jobs.delete("batch", &background).await.unwrap();
    scene
        .wait_health(
            "terminating",
            Health::Terminating,
            Some("health-suspended/batch: being deleted; finalizers: example.com/hold"),
        )
        .await;
    let release = serde_json::json!({ "metadata": { "finalizers": null } });
    jobs.patch("batch", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    scene.stop().await;
}

#[tokio::test]
async fn a_custom_kind_is_judged_by_kstatus() {
    let env = env().await;
    let spec = WorkloadSpec {
        widgets: vec!["gear".into()],
        ..WorkloadSpec::default()
    };
    let scene = Scene::start(env, Widgets, "health-widgets", "factory", spec).await;
    // No status at all: current, as kstatus has it.
    scene.wait_ready("current").await;
    let condition_of = |type_: &str, status: &str, message: &str| serde_json::json!({ "type": type_, "status": status, "reason": "Test", "message": message });
    let waiting = serde_json::json!({
        "observedGeneration": null,
        "conditions": [condition_of("Ready", "False", "waiting for the gears")],
    });
    scene.play::<Widget>("gear", waiting).await;
    scene
        .wait_health(
            "not ready",
            Health::Progressing,
            Some("health-widgets/gear: not ready: waiting for the gears"),
        )
        .await;
    let stalled = serde_json::json!({
        "observedGeneration": null,
        "conditions": [condition_of("Ready", "False", "waiting"), condition_of("Stalled", "True", "out of gears")],
    });
    scene.play::<Widget>("gear", stalled).await;
    scene
        .wait_health(
            "stalled",
            Health::Degraded,
            Some("health-widgets/gear: stalled: out of gears"),
        )
        .await;
    let ready = serde_json::json!({
        "observedGeneration": null,
        "conditions": [condition_of("Ready", "True", ""), condition_of("Stalled", "False", "")],
    });
    scene.play::<Widget>("gear", ready).await;
    scene.wait_health("ready", Health::Healthy, None).await;
    scene.stop().await;
}

#[tokio::test]
async fn a_user_rule_judges_its_kind() {
    let env = env().await;
    let spec = WorkloadSpec {
        configs: vec!["settings".into()],
        ..WorkloadSpec::default()
    };
    let scene = Scene::start(env, Configs, "health-configs", "app", spec).await;
    scene
        .wait_health(
            "waiting for the label",
            Health::Progressing,
            Some("health-configs/settings: waiting for the ready label"),
        )
        .await;
    let api = scene.children::<ConfigMap>().await;
    let label = |value: &str| serde_json::json!({ "metadata": { "labels": { "ready": value } } });
    let params = PatchParams::default();
    api.patch("settings", &params, &Patch::Merge(&label("yes")))
        .await
        .unwrap();
    scene
        .wait("labelled ready", |p| {
            reads(p, Health::Healthy, None) && condition(p, "Ready").is_some_and(|c| c.0 == "True")
        })
        .await;
    api.patch("settings", &params, &Patch::Merge(&label("no")))
        .await
        .unwrap();
    scene
        .wait_health(
            "labelled not ready",
            Health::Degraded,
            Some("health-configs/settings: labelled ready=no"),
        )
        .await;
    scene.stop().await;
}

#[tokio::test]
async fn an_unreachable_cluster_reads_unknown_not_degraded() {
    // The operator reaches cluster-a through a relay, which takes it away from the operator alone.
    let env = env().await;
    let relay = env.relay("cluster-a").await.unwrap();
    let mut kubeconfig = env.kubeconfig().clone();
    relay.route(&mut kubeconfig).unwrap();
    let spec = WorkloadSpec {
        deployments: vec!["web".into()],
        ..WorkloadSpec::default()
    };
    let (namespace, name) = ("health-unreachable", "far");
    let scene = Scene::start_with(env, kubeconfig, Unreachable, namespace, name, spec).await;
    let degraded = serde_json::json!({
        "observedGeneration": null, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 0,
        "conditions": [{ "type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
                         "message": "none available" }],
    });
    scene.play::<Deployment>("web", degraded).await;
    scene
        .wait_health(
            "degraded",
            Health::Degraded,
            Some("health-unreachable/web: 0/3 replicas available: none available"),
        )
        .await;

    relay.refuse();
    // Once the operator knows cluster-a does not answer, a change of the parent reconciles it: a reconcile
    // before that may trust the cache, as it does for any cluster that answers.
    eventually("cluster-a not ready", polling(), async || {
        let report = scene.running().readiness();
        match report.clusters.get("cluster-a").map(|c| c.status) {
            Some(kubeplex::readiness::ClusterReadiness::Ready) | None => Err(format!("{report:?}")),
            Some(_) => Ok(()),
        }
    })
    .await;
    let nudge =
        serde_json::json!({ "metadata": { "annotations": { "test.kubeplex.dev/nudge": "1" } } });
    scene
        .parents()
        .await
        .patch("far", &PatchParams::default(), &Patch::Merge(&nudge))
        .await
        .unwrap();
    let parent = scene
        .wait_health(
            "unknown",
            Health::Unknown,
            Some("health-unreachable/web: the cluster is unreachable"),
        )
        .await;
    assert_eq!(ready(&parent), ("False", "ClustersNotApplied"));
    scene.stop().await;
}
