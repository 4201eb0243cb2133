//! Children's health on real clusters. The test clusters run no kubelet and no controller-manager, so each
//! test plays the workload: it writes the child's status subresource as the cluster's controllers would
//! (`observedGeneration`, replica counts, Job and kstatus conditions), and the parent's status, its
//! `Applied` and `Ready` conditions, its Events and what `cx.children` reads follow within the health
//! debounce.

mod support;

/// This binary's own modules, in `tests/runtime_health/`.
mod runtime_health {
    pub mod parent;
}

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{CustomResourceExt, Resource};
use kubeplex::{ClusterHealth, Health, Manager};
use kubeplex_testenv::{Polling, SharedTestEnv, TestEnv, eventually};
use runtime_health::parent::{
    Configs, Deployments, Jobs, SEEN_BY_CX, Unreachable, Widget, Widgets, Workload, WorkloadSpec,
};
use support::{WAIT, create_namespace, wait_started};

static CLUSTERS: SharedTestEnv = SharedTestEnv::new(|| {
    TestEnv::builder()
        .clusters(["control", "cluster-a"])
        .crd("control", Workload::crd())
        .crd("cluster-a", Widget::crd())
});

/// Within [`WAIT`], every 200 ms.
fn polling() -> Polling {
    Polling::within(WAIT).every(Duration::from_millis(200))
}

/// Creates the parent `name` in `namespace` of control (and that namespace in cluster-a, for its children).
async fn create_workload(env: &TestEnv, namespace: &str, name: &str, spec: WorkloadSpec) {
    let control = env.client("control").await.unwrap();
    create_namespace(&control, namespace).await;
    create_namespace(&env.client("cluster-a").await.unwrap(), namespace).await;
    let api: Api<Workload> = Api::namespaced(control, namespace);
    api.create(&PostParams::default(), &Workload::new(name, spec))
        .await
        .unwrap();
}

/// A condition of the parent: (status, reason, message).
fn condition(parent: &Workload, type_: &str) -> Option<(String, String, String)> {
    let conditions = &parent.status.as_ref()?.fleet.conditions;
    let c = conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// The parent's children's health in cluster-a, as its status says.
fn health(parent: &Workload) -> Option<&ClusterHealth> {
    parent
        .status
        .as_ref()?
        .fleet
        .clusters
        .get("cluster-a")?
        .health
        .as_ref()
}

/// Polls the parent until `done` holds; fails the test with its last status after [`WAIT`].
async fn wait_workload(
    env: &TestEnv,
    namespace: &str,
    name: &str,
    what: &str,
    done: impl Fn(&Workload) -> bool,
) -> Workload {
    let api: Api<Workload> = Api::namespaced(env.client("control").await.unwrap(), namespace);
    eventually(what, polling(), async || {
        let parent = api.get(name).await.unwrap();
        if done(&parent) {
            Ok(parent)
        } else {
            Err(format!("{:#?}", parent.status))
        }
    })
    .await
}

/// Whether the parent's cluster-a health is `state` with `worst` as its worst child's line.
fn reads(parent: &Workload, state: Health, worst: Option<&str>) -> bool {
    health(parent).is_some_and(|h| h.state == state && h.worst.as_deref() == worst)
}

/// Writes `status` into the child's status subresource, as its controller would.
async fn play<K>(env: &TestEnv, namespace: &str, name: &str, status: serde_json::Value)
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(env.client("cluster-a").await.unwrap(), namespace);
    // The child exists once the parent has been reconciled.
    let child = eventually(format!("{name} created"), polling(), async || {
        api.get_opt(name).await.unwrap()
    })
    .await;
    let generation = child.meta().generation;
    let mut status = status;
    if status
        .get("observedGeneration")
        .is_some_and(serde_json::Value::is_null)
    {
        status["observedGeneration"] = generation.into();
    }
    let patch = serde_json::json!({ "status": status });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_deployment_goes_progressing_healthy_degraded_and_the_parent_follows() {
    let env = CLUSTERS.get().await.unwrap();
    let ns = "health-deployments";
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Deployments)
        .start()
        .await
        .unwrap();
    wait_started(&running, "the controller started").await;
    let spec = WorkloadSpec {
        deployments: vec!["web".into()],
        ..WorkloadSpec::default()
    };
    create_workload(env, ns, "shop", spec).await;
    let parent = wait_workload(env, ns, "shop", "applied, no status yet", |p| {
        reads(
            p,
            Health::Progressing,
            Some("health-deployments/web: not observed by its controller yet"),
        )
    })
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
    play::<Deployment>(env, ns, "web", rolling).await;
    wait_workload(env, ns, "shop", "0/3 available", |p| {
        reads(
            p,
            Health::Progressing,
            Some("health-deployments/web: 0/3 replicas available"),
        )
    })
    .await;

    let available = serde_json::json!({
        "observedGeneration": null, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3,
        "conditions": [{ "type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                         "message": "Deployment has minimum availability." }],
    });
    play::<Deployment>(env, ns, "web", available).await;
    let parent = wait_workload(env, ns, "shop", "Ready=True", |p| {
        condition(p, "Ready").is_some_and(|c| c.0 == "True")
    })
    .await;
    assert_eq!(
        health(&parent).map(|h| (h.state, h.healthy, h.worst.clone())),
        Some((Health::Healthy, 1, None))
    );
    assert_eq!(condition(&parent, "Ready").unwrap().1, "AllChildrenHealthy");
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
    play::<Deployment>(env, ns, "web", crashing).await;
    let worst = "health-deployments/web: 1/3 replicas available: Deployment does not have minimum availability.";
    let parent = wait_workload(env, ns, "shop", "Degraded", |p| {
        reads(p, Health::Degraded, Some(worst))
    })
    .await;
    let (status, reason, _) = condition(&parent, "Ready").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ChildrenDegraded")
    );
    assert_eq!(
        condition(&parent, "Applied").unwrap().0,
        "True",
        "still applied"
    );

    // Told once as an Event on the parent, naming the cluster and the child.
    let events: Api<Event> = Api::namespaced(env.client("control").await.unwrap(), ns);
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
    support::stop(running).await;
}

#[tokio::test]
async fn a_failed_job_is_degraded_with_its_reason() {
    let env = CLUSTERS.get().await.unwrap();
    let ns = "health-jobs";
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Jobs)
        .start()
        .await
        .unwrap();
    wait_started(&running, "the controller started").await;
    let spec = WorkloadSpec {
        jobs: vec!["migrate".into()],
        ..WorkloadSpec::default()
    };
    create_workload(env, ns, "db", spec).await;
    wait_workload(env, ns, "db", "running", |p| {
        reads(
            p,
            Health::Progressing,
            Some("health-jobs/migrate: running: 0 active, 0 succeeded"),
        )
    })
    .await;
    // As the Job controller writes a failure: FailureTarget first, then Failed.
    let now = "2026-01-01T00:00:00Z";
    let failed = |reason: &str, message: &str| {
        serde_json::json!({ "status": "True", "reason": reason, "message": message,
                            "lastProbeTime": now, "lastTransitionTime": now })
    };
    let mut target = failed(
        "BackoffLimitExceeded",
        "Job has reached the specified backoff limit",
    );
    target["type"] = "FailureTarget".into();
    let mut done = target.clone();
    done["type"] = "Failed".into();
    let status = serde_json::json!({ "startTime": now, "failed": 1, "conditions": [target, done] });
    play::<Job>(env, ns, "migrate", status).await;
    let parent = wait_workload(env, ns, "db", "failed", |p| {
        reads(
            p,
            Health::Degraded,
            Some("health-jobs/migrate: failed: Job has reached the specified backoff limit"),
        )
    })
    .await;
    assert_eq!(condition(&parent, "Ready").unwrap().1, "ChildrenDegraded");
    support::stop(running).await;
}

#[tokio::test]
async fn a_custom_kind_is_judged_by_kstatus() {
    let env = CLUSTERS.get().await.unwrap();
    let ns = "health-widgets";
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Widgets)
        .start()
        .await
        .unwrap();
    wait_started(&running, "the controller started").await;
    let spec = WorkloadSpec {
        widgets: vec!["gear".into()],
        ..WorkloadSpec::default()
    };
    create_workload(env, ns, "factory", spec).await;
    // No status at all: current, as kstatus has it.
    wait_workload(env, ns, "factory", "current", |p| {
        condition(p, "Ready").is_some_and(|c| c.0 == "True")
    })
    .await;
    let condition_of = |type_: &str, status: &str, message: &str| serde_json::json!({ "type": type_, "status": status, "reason": "Test", "message": message });
    let waiting = serde_json::json!({
        "observedGeneration": null,
        "conditions": [condition_of("Ready", "False", "waiting for the gears")],
    });
    play::<Widget>(env, ns, "gear", waiting).await;
    wait_workload(env, ns, "factory", "not ready", |p| {
        reads(
            p,
            Health::Progressing,
            Some("health-widgets/gear: not ready: waiting for the gears"),
        )
    })
    .await;
    let stalled = serde_json::json!({
        "observedGeneration": null,
        "conditions": [condition_of("Ready", "False", "waiting"), condition_of("Stalled", "True", "out of gears")],
    });
    play::<Widget>(env, ns, "gear", stalled).await;
    wait_workload(env, ns, "factory", "stalled", |p| {
        reads(
            p,
            Health::Degraded,
            Some("health-widgets/gear: stalled: out of gears"),
        )
    })
    .await;
    let ready = serde_json::json!({
        "observedGeneration": null,
        "conditions": [condition_of("Ready", "True", ""), condition_of("Stalled", "False", "")],
    });
    play::<Widget>(env, ns, "gear", ready).await;
    wait_workload(env, ns, "factory", "ready", |p| {
        reads(p, Health::Healthy, None)
    })
    .await;
    support::stop(running).await;
}

#[tokio::test]
async fn a_user_rule_judges_its_kind() {
    let env = CLUSTERS.get().await.unwrap();
    let ns = "health-configs";
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Configs)
        .start()
        .await
        .unwrap();
    wait_started(&running, "the controller started").await;
    let spec = WorkloadSpec {
        configs: vec!["settings".into()],
        ..WorkloadSpec::default()
    };
    create_workload(env, ns, "app", spec).await;
    wait_workload(env, ns, "app", "waiting for the label", |p| {
        reads(
            p,
            Health::Progressing,
            Some("health-configs/settings: waiting for the ready label"),
        )
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(env.client("cluster-a").await.unwrap(), ns);
    let label = |value: &str| serde_json::json!({ "metadata": { "labels": { "ready": value } } });
    api.patch(
        "settings",
        &PatchParams::default(),
        &Patch::Merge(&label("yes")),
    )
    .await
    .unwrap();
    wait_workload(env, ns, "app", "labelled ready", |p| {
        reads(p, Health::Healthy, None) && condition(p, "Ready").is_some_and(|c| c.0 == "True")
    })
    .await;
    api.patch(
        "settings",
        &PatchParams::default(),
        &Patch::Merge(&label("no")),
    )
    .await
    .unwrap();
    wait_workload(env, ns, "app", "labelled not ready", |p| {
        reads(
            p,
            Health::Degraded,
            Some("health-configs/settings: labelled ready=no"),
        )
    })
    .await;
    support::stop(running).await;
}

#[tokio::test]
async fn an_unreachable_cluster_reads_unknown_not_degraded() {
    // Clusters of its own: this test stops one.
    let env = TestEnv::builder()
        .clusters(["control", "cluster-a"])
        .crd("control", Workload::crd())
        .crd("cluster-a", Widget::crd())
        .start()
        .await
        .unwrap();
    let ns = "health-unreachable";
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Unreachable)
        .start()
        .await
        .unwrap();
    wait_started(&running, "the controller started").await;
    let spec = WorkloadSpec {
        deployments: vec!["web".into()],
        ..WorkloadSpec::default()
    };
    create_workload(&env, ns, "far", spec).await;
    let degraded = serde_json::json!({
        "observedGeneration": null, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 0,
        "conditions": [{ "type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
                         "message": "none available" }],
    });
    play::<Deployment>(&env, ns, "web", degraded).await;
    wait_workload(&env, ns, "far", "degraded", |p| {
        reads(
            p,
            Health::Degraded,
            Some("health-unreachable/web: 0/3 replicas available: none available"),
        )
    })
    .await;

    env.stop("cluster-a").unwrap();
    // Once the operator knows cluster-a does not answer, a change of the parent reconciles it: a reconcile
    // before that may trust the cache, as it does for any cluster that answers.
    eventually("cluster-a not ready", polling(), async || {
        let report = running.health();
        match report.contexts.get("cluster-a").map(|c| c.status) {
            Some(kubeplex::ContextStatus::Ready) | None => Err(format!("{report:?}")),
            Some(_) => Ok(()),
        }
    })
    .await;
    let api: Api<Workload> = Api::namespaced(env.client("control").await.unwrap(), ns);
    let nudge =
        serde_json::json!({ "metadata": { "annotations": { "test.kubeplex.dev/nudge": "1" } } });
    api.patch("far", &PatchParams::default(), &Patch::Merge(&nudge))
        .await
        .unwrap();
    let parent = wait_workload(&env, ns, "far", "unknown", |p| {
        reads(
            p,
            Health::Unknown,
            Some("health-unreachable/web: the cluster is unreachable"),
        )
    })
    .await;
    let (status, reason, _) = condition(&parent, "Ready").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ClustersNotReady")
    );
    support::stop(running).await;
}
