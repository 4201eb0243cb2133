//! The rules of the kinds an operator creates beside its workloads, on real servers: Pods, CronJobs,
//! HorizontalPodAutoscalers, PodDisruptionBudgets and Ingresses as the test plays their controllers, and
//! CustomResourceDefinitions and APIServices as the API server's own controllers judge them.

use std::sync::Arc;

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec,
};
use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, JobSpec, JobTemplateSpec};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::networking::v1::{Ingress, IngressBackend, IngressServiceBackend};
use k8s_openapi::api::networking::v1::{IngressSpec, ServiceBackendPort};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;
use kube::ResourceExt;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams};
use kubeplex::health::Health;
use kubeplex::{Action, Child, ContextName, Controller, Cx, Plan, Reconcile};
use kubeplex_testenv::eventually;

use super::env;
use super::parent::{CLUSTER_A, CONTROL, Definition, Workload, WorkloadSpec, meta, pod, selector};
use super::scene::{Scene, health, ready};
use crate::support::polling;

use apiextensions::{CustomResourceDefinition, CustomResourceDefinitionNames};
use apiextensions::{CustomResourceDefinitionSpec, CustomResourceDefinitionVersion};
use apiextensions::{CustomResourceValidation, JSONSchemaProps};
use apiregistration::{APIService, APIServiceSpec, ServiceReference};

/// The group of the CustomResourceDefinition children.
const GADGETS: &str = "gadgets.test.kubeplex.dev";

/// A controller of Workloads in `control`, namespace `$namespace`, with the kinds of this file as children
/// in cluster-a (the API extensions cluster-scoped).
macro_rules! api_kinds_controller {
    ($name:ident, $namespace:literal) => {
        struct $name;

        impl Controller for $name {
            type Resource = Workload;
            type Context = ContextName;
            fn plan() -> Plan<ContextName> {
                let here = || [$namespace];
                Plan::new($namespace)
                    .with_contexts([CONTROL])
                    .with_namespaces([$namespace])
                    .owns(
                        Child::of::<Pod>()
                            .with_contexts([CLUSTER_A])
                            .with_namespaces(here()),
                    )
                    .owns(
                        Child::of::<CronJob>()
                            .with_contexts([CLUSTER_A])
                            .with_namespaces(here()),
                    )
                    .owns(
                        Child::of::<HorizontalPodAutoscaler>()
                            .with_contexts([CLUSTER_A])
                            .with_namespaces(here()),
                    )
                    .owns(
                        Child::of::<PodDisruptionBudget>()
                            .with_contexts([CLUSTER_A])
                            .with_namespaces(here()),
                    )
                    .owns(
                        Child::of::<Ingress>()
                            .with_contexts([CLUSTER_A])
                            .with_namespaces(here()),
                    )
                    .owns(Child::of::<CustomResourceDefinition>().with_contexts([CLUSTER_A]))
                    .owns(Child::of::<APIService>().with_contexts([CLUSTER_A]))
            }
        }

        impl Reconcile for $name {
            type Error = kubeplex::Error;
            async fn reconcile(
                &self,
                parent: Arc<Workload>,
                cx: &Cx<ContextName>,
            ) -> Result<Action, kubeplex::Error> {
                reconcile(&parent, cx)
            }
        }
    };
}

api_kinds_controller!(Served, "health-served");
api_kinds_controller!(Extensions, "health-extensions");

fn reconcile(parent: &Workload, cx: &Cx<ContextName>) -> Result<Action, kubeplex::Error> {
    let namespace = parent.namespace().unwrap_or_default();
    let spec = &parent.spec;
    for name in &spec.pods {
        let template = pod(name);
        let pod = Pod {
            metadata: ObjectMeta {
                labels: template.metadata.and_then(|m| m.labels),
                ..meta(name, &namespace)
            },
            spec: template.spec,
            ..Pod::default()
        };
        cx.child(CLUSTER_A, pod)?;
    }
    for name in &spec.cron_jobs {
        let job_template = JobTemplateSpec {
            spec: Some(JobSpec {
                template: pod(name),
                ..JobSpec::default()
            }),
            ..JobTemplateSpec::default()
        };
        let cron_job = CronJob {
            metadata: meta(name, &namespace),
            spec: CronJobSpec {
                schedule: "0 3 * * *".into(),
                suspend: Some(spec.cron_suspended),
                job_template,
                ..CronJobSpec::default()
            },
            ..CronJob::default()
        };
        cx.child(CLUSTER_A, cron_job)?;
    }
    for name in &spec.autoscalers {
        let autoscaler = HorizontalPodAutoscaler {
            metadata: meta(name, &namespace),
            spec: HorizontalPodAutoscalerSpec {
                max_replicas: 5,
                scale_target_ref: CrossVersionObjectReference {
                    api_version: Some("apps/v1".into()),
                    kind: "Deployment".into(),
                    name: name.clone(),
                },
                ..HorizontalPodAutoscalerSpec::default()
            },
            ..HorizontalPodAutoscaler::default()
        };
        cx.child(CLUSTER_A, autoscaler)?;
    }
    for name in &spec.budgets {
        let budget = PodDisruptionBudget {
            metadata: meta(name, &namespace),
            spec: Some(PodDisruptionBudgetSpec {
                min_available: Some(IntOrString::Int(2)),
                selector: Some(selector(name)),
                ..PodDisruptionBudgetSpec::default()
            }),
            ..PodDisruptionBudget::default()
        };
        cx.child(CLUSTER_A, budget)?;
    }
    for name in &spec.ingresses {
        let backend = IngressServiceBackend {
            name: name.clone(),
            port: Some(ServiceBackendPort {
                number: Some(80),
                ..ServiceBackendPort::default()
            }),
        };
        let ingress = Ingress {
            metadata: meta(name, &namespace),
            spec: Some(IngressSpec {
                default_backend: Some(IngressBackend {
                    service: Some(backend),
                    ..IngressBackend::default()
                }),
                ..IngressSpec::default()
            }),
            ..Ingress::default()
        };
        cx.child(CLUSTER_A, ingress)?;
    }
    for definition in &spec.definitions {
        cx.child(CLUSTER_A, custom_resource_definition(definition))?;
    }
    for name in &spec.api_services {
        cx.child(CLUSTER_A, api_service(name, &namespace))?;
    }
    Ok(Action::await_change())
}

fn custom_resource_definition(definition: &Definition) -> CustomResourceDefinition {
    let Definition { plural, kind } = definition;
    let schema = JSONSchemaProps {
        type_: Some("object".into()),
        x_kubernetes_preserve_unknown_fields: Some(true),
        ..JSONSchemaProps::default()
    };
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(format!("{plural}.{GADGETS}")),
            ..ObjectMeta::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: GADGETS.into(),
            names: CustomResourceDefinitionNames {
                plural: plural.clone(),
                kind: kind.clone(),
                ..CustomResourceDefinitionNames::default()
            },
            scope: "Namespaced".into(),
            versions: vec![CustomResourceDefinitionVersion {
                name: "v1".into(),
                served: true,
                storage: true,
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(schema),
                }),
                ..CustomResourceDefinitionVersion::default()
            }],
            ..CustomResourceDefinitionSpec::default()
        },
        status: None,
    }
}

/// An APIService of the group `<name>.test.kubeplex.dev`, served by the Service `name` in `namespace`.
fn api_service(name: &str, namespace: &str) -> APIService {
    APIService {
        metadata: ObjectMeta {
            name: Some(format!("v1.{name}.test.kubeplex.dev")),
            ..ObjectMeta::default()
        },
        spec: Some(APIServiceSpec {
            group: Some(format!("{name}.test.kubeplex.dev")),
            version: Some("v1".into()),
            group_priority_minimum: 1000,
            version_priority: 10,
            insecure_skip_tls_verify: Some(true),
            service: Some(ServiceReference {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                port: Some(443),
            }),
            ..APIServiceSpec::default()
        }),
        status: None,
    }
}

#[tokio::test]
async fn pods_cron_jobs_autoscalers_budgets_and_ingresses_follow_their_rules() {
    let env = env().await;
    let spec = WorkloadSpec {
        pods: vec!["worker".into()],
        cron_jobs: vec!["nightly".into()],
        cron_suspended: true,
        autoscalers: vec!["scaler".into()],
        budgets: vec!["budget".into()],
        ingresses: vec!["entry".into()],
        ..WorkloadSpec::default()
    };
    let scene = Scene::start(env, Served, "health-served", "site", spec).await;
    // Nothing has run: a pending Pod, no autoscaler or budget status, no address, a suspended CronJob.
    scene
        .wait("nothing runs yet", |p| {
            health(p).is_some_and(|h| (h.progressing, h.suspended, h.healthy) == (4, 1, 0))
        })
        .await;

    // The scheduler finds no node for the Pod: Degraded, in the scheduler's words.
    let now = "2026-01-01T00:00:00Z";
    let unschedulable = serde_json::json!({ "phase": "Pending", "conditions": [
        { "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
          "message": "0/3 nodes are available: 3 Insufficient cpu.", "lastTransitionTime": now }] });
    scene.play::<Pod>("worker", unschedulable).await;
    let worker =
        "health-served/worker: unschedulable: 0/3 nodes are available: 3 Insufficient cpu.";
    scene
        .wait_health("unschedulable", Health::Degraded, Some(worker))
        .await;

    // Each kind's controller reports it healthy; the CronJob is let go by its parent.
    let running = |ready: bool, state: serde_json::Value, restarts: i32| {
        let reason = (!ready).then_some("ContainersNotReady");
        serde_json::json!({ "phase": "Running", "conditions": [
            { "type": "PodScheduled", "status": "True", "lastTransitionTime": now },
            { "type": "Ready", "status": if ready { "True" } else { "False" }, "reason": reason,
              "lastTransitionTime": now }],
            "containerStatuses": [{ "name": "main", "ready": ready, "restartCount": restarts,
                "image": "registry.example/app:1", "imageID": "", "state": state }] })
    };
    let started = serde_json::json!({ "running": { "startedAt": now } });
    scene.play::<Pod>("worker", running(true, started, 0)).await;
    let able = |status: &str, reason: &str| {
        serde_json::json!({ "type": "AbleToScale",
        "status": status, "reason": reason, "lastTransitionTime": now })
    };
    let active = |status: &str, reason: &str, message: &str| {
        serde_json::json!({
        "type": "ScalingActive", "status": status, "reason": reason, "message": message,
        "lastTransitionTime": now })
    };
    let scaling = serde_json::json!({ "currentReplicas": 2, "desiredReplicas": 2, "conditions": [
        able("True", "ReadyForNewScale"), active("True", "ValidMetricFound", "")] });
    scene
        .play::<HorizontalPodAutoscaler>("scaler", scaling.clone())
        .await;
    let budget = |healthy: i32| {
        serde_json::json!({ "observedGeneration": null,
        "currentHealthy": healthy, "desiredHealthy": 2, "expectedPods": 3,
        "disruptionsAllowed": (healthy - 2).max(0) })
    };
    scene.play::<PodDisruptionBudget>("budget", budget(3)).await;
    let address = serde_json::json!({ "loadBalancer": { "ingress": [{ "ip": "192.0.2.20" }] } });
    scene.play::<Ingress>("entry", address).await;
    let unsuspend = serde_json::json!({ "spec": { "cron_suspended": false } });
    (scene.parents().await)
        .patch("site", &PatchParams::default(), &Patch::Merge(&unsuspend))
        .await
        .unwrap();
    let parent = scene.wait_ready("every child healthy").await;
    assert_eq!(
        health(&parent).map(|h| (h.state, h.healthy)),
        Some((Health::Healthy, 5))
    );

    // The Pod's container crash-loops: Degraded, told as an Event naming the cluster.
    let waiting = serde_json::json!({ "waiting": { "reason": "CrashLoopBackOff", "message": "back-off 5m0s" } });
    scene
        .play::<Pod>("worker", running(false, waiting, 5))
        .await;
    let worker = "health-served/worker: container main: CrashLoopBackOff (restarted 5 times)";
    let parent = scene
        .wait_health("crash loop", Health::Degraded, Some(worker))
        .await;
    assert_eq!(ready(&parent), ("False", "ChildrenDegraded"));
    let events: Api<Event> = Api::namespaced(env.client("control").await.unwrap(), scene.namespace);
    let note = eventually("a ChildDegraded event", polling(), async || {
        let list = events.list(&ListParams::default()).await.unwrap();
        let crash = |e: &Event| {
            e.note
                .as_deref()
                .is_some_and(|n| n.contains("CrashLoopBackOff"))
        };
        (list.items.into_iter())
            .filter(|e| e.reason.as_deref() == Some("ChildDegraded"))
            .find(crash)
            .and_then(|e| e.note)
    })
    .await;
    assert_eq!(
        note,
        "cluster-a: child health-served/worker is Degraded: container main: CrashLoopBackOff (restarted 5 times)"
    );
    let ended = serde_json::json!({ "terminated": { "exitCode": 0, "reason": "Completed" } });
    let mut succeeded = running(false, ended, 5);
    succeeded["phase"] = "Succeeded".into();
    scene.play::<Pod>("worker", succeeded).await;
    scene.wait_ready("the pod succeeded").await;

    // The autoscaler cannot read its metrics, then the budget has too few pods.
    let blind = serde_json::json!({ "conditions": [able("True", "SucceededGetScale"),
        active("False", "FailedGetResourceMetric", "the metrics API is unavailable")] });
    scene.play::<HorizontalPodAutoscaler>("scaler", blind).await;
    let scaler = "health-served/scaler: scaling not active: the metrics API is unavailable";
    scene
        .wait_health("blind autoscaler", Health::Degraded, Some(scaler))
        .await;
    scene
        .play::<HorizontalPodAutoscaler>("scaler", scaling)
        .await;
    scene.play::<PodDisruptionBudget>("budget", budget(1)).await;
    let short = "health-served/budget: 1/2 pods healthy";
    scene
        .wait_health("budget short", Health::Degraded, Some(short))
        .await;
    scene.play::<PodDisruptionBudget>("budget", budget(2)).await;
    scene.wait_ready("the budget met").await;
    scene.stop().await;
}

#[tokio::test]
async fn custom_resource_definitions_and_api_services_read_as_their_servers_judge_them() {
    let env = env().await;
    let definition = |plural: &str, kind: &str| Definition {
        plural: plural.into(),
        kind: kind.into(),
    };
    let spec = WorkloadSpec {
        definitions: vec![definition("gizmos", "Gizmo")],
        ..WorkloadSpec::default()
    };
    let scene = Scene::start(env, Extensions, "health-extensions", "api", spec).await;
    // The API server's own controllers judge these: the CRD's names are accepted and it is established.
    scene.wait_ready("the CRD established").await;

    // A second CRD whose kind another has taken is never established.
    let parents = scene.parents().await;
    let want = async |spec: serde_json::Value| {
        let patch = serde_json::json!({ "spec": spec });
        (parents.patch("api", &PatchParams::default(), &Patch::Merge(&patch)))
            .await
            .unwrap();
    };
    let gizmos = definition("gizmos", "Gizmo");
    let clash = definition("doohickeys", "Gizmo");
    want(serde_json::json!({ "definitions": [gizmos, clash] })).await;
    let named = "doohickeys.gadgets.test.kubeplex.dev: names not accepted: ";
    let parent = scene
        .wait("the names' clash", |p| {
            health(p).is_some_and(|h| {
                (h.degraded, h.healthy) == (1, 1)
                    && h.worst.as_deref().is_some_and(|w| w.starts_with(named))
            })
        })
        .await;
    assert_eq!(ready(&parent), ("False", "ChildrenDegraded"));

    // An APIService whose Service does not exist is not available, as the aggregator finds.
    want(serde_json::json!({ "definitions": [gizmos], "api_services": ["missing"] })).await;
    let unavailable = "v1.missing.test.kubeplex.dev: not available: ";
    let parent = scene
        .wait("the missing service", |p| {
            health(p).is_some_and(|h| {
                (h.degraded, h.healthy) == (1, 1)
                    && h.worst
                        .as_deref()
                        .is_some_and(|w| w.starts_with(unavailable))
            })
        })
        .await;
    assert_eq!(ready(&parent), ("False", "ChildrenDegraded"));

    // Let go: kubeplex deletes the children from cluster-a (a broken APIService left behind would fail
    // other clients' discovery).
    want(serde_json::json!({ "definitions": [], "api_services": [] })).await;
    let cluster_a = env.client("cluster-a").await.unwrap();
    let services: Api<APIService> = Api::all(cluster_a.clone());
    let definitions: Api<CustomResourceDefinition> = Api::all(cluster_a);
    eventually("the children deleted", polling(), async || {
        let service = services
            .get_opt("v1.missing.test.kubeplex.dev")
            .await
            .unwrap();
        let crd = (definitions
            .get_opt("gizmos.gadgets.test.kubeplex.dev")
            .await)
            .unwrap();
        (service.is_none() && crd.is_none())
            .then_some(())
            .ok_or("still there")
    })
    .await;
    scene.stop().await;
}
