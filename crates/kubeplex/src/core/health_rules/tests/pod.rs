//! The Pod rule over the states the kubelet and the scheduler write (kstatus' and Argo CD's Pod cases
//! among them): crash loops, image pulls and unschedulable Pods are never healthy.

use serde_json::json;

use super::{child, condition, table};
use crate::core::child_health::Health::{Degraded, Healthy, Progressing};
use crate::core::health_rules::pod;

/// A Pod in `phase` with `conditions` and `containers` (each `{name, ready, restartCount, state}`).
fn a_pod(
    phase: &str,
    conditions: serde_json::Value,
    containers: serde_json::Value,
) -> super::Projection {
    child(
        1,
        json!({ "restartPolicy": "Always" }),
        json!({ "phase": phase, "conditions": conditions, "containerStatuses": containers }),
    )
}

fn waiting(name: &str, reason: &str, restarts: i64) -> serde_json::Value {
    json!({ "name": name, "ready": false, "restartCount": restarts,
            "image": "nginx", "imageID": "", "state": { "waiting": { "reason": reason, "message": "back-off" } } })
}

fn running(name: &str, ready: bool) -> serde_json::Value {
    json!({ "name": name, "ready": ready, "restartCount": 0, "image": "nginx", "imageID": "",
            "state": { "running": { "startedAt": "2026-12-06T10:00:00Z" } } })
}

#[test]
fn a_pod_is_healthy_only_when_it_runs_ready_or_has_succeeded() {
    let ready = condition("Ready", "True", "", "");
    let not_ready = condition(
        "Ready",
        "False",
        "ContainersNotReady",
        "containers with unready status: [web]",
    );
    let scheduled = condition("PodScheduled", "True", "", "");
    table(
        pod,
        &[
            (
                "no status yet",
                child(1, json!({}), serde_json::Value::Null),
                Progressing,
                "no status yet",
            ),
            (
                "running and ready",
                a_pod(
                    "Running",
                    json!([scheduled, ready]),
                    json!([running("web", true)]),
                ),
                Healthy,
                "running, ready",
            ),
            (
                "running, not ready",
                a_pod(
                    "Running",
                    json!([scheduled, not_ready]),
                    json!([running("web", false)]),
                ),
                Progressing,
                "running, not ready: containers with unready status: [web]",
            ),
            (
                "running with no conditions",
                a_pod("Running", json!([]), json!([running("web", false)])),
                Progressing,
                "running, not ready yet",
            ),
            (
                "succeeded",
                a_pod(
                    "Succeeded",
                    json!([condition("Ready", "False", "PodCompleted", "")]),
                    json!([]),
                ),
                Healthy,
                "succeeded",
            ),
            (
                "failed",
                child(
                    1,
                    json!({}),
                    json!({ "phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory." }),
                ),
                Degraded,
                "failed: The node was low on resource: memory.",
            ),
        ],
    );
}

#[test]
fn a_container_that_will_not_start_by_itself_degrades_its_pod() {
    let not_ready = condition("Ready", "False", "ContainersNotReady", "");
    table(
        pod,
        &[
            (
                "crash loop, no Ready condition",
                a_pod(
                    "Running",
                    json!([]),
                    json!([waiting("web", "CrashLoopBackOff", 5)]),
                ),
                Degraded,
                "container web: CrashLoopBackOff (restarted 5 times)",
            ),
            (
                "image pull back-off",
                a_pod(
                    "Pending",
                    json!([not_ready]),
                    json!([waiting("web", "ImagePullBackOff", 0)]),
                ),
                Degraded,
                "container web: ImagePullBackOff",
            ),
            (
                "image pull error",
                a_pod(
                    "Pending",
                    json!([]),
                    json!([waiting("web", "ErrImagePull", 0)]),
                ),
                Degraded,
                "container web: ErrImagePull",
            ),
            (
                "a Secret the container needs is missing",
                a_pod(
                    "Pending",
                    json!([]),
                    json!([waiting("web", "CreateContainerConfigError", 0)]),
                ),
                Degraded,
                "container web: CreateContainerConfigError",
            ),
            (
                "still creating",
                a_pod(
                    "Pending",
                    json!([]),
                    json!([waiting("web", "ContainerCreating", 0)]),
                ),
                Progressing,
                "pending, not ready yet",
            ),
            (
                "an init container crash-loops",
                child(
                    1,
                    json!({}),
                    json!({ "phase": "Pending",
                    "initContainerStatuses": [waiting("migrate", "CrashLoopBackOff", 1)] }),
                ),
                Degraded,
                "container migrate: CrashLoopBackOff (restarted once)",
            ),
        ],
    );
}

#[test]
fn an_unschedulable_pod_is_degraded_and_one_waiting_for_the_scheduler_progresses() {
    let unschedulable = condition(
        "PodScheduled",
        "False",
        "Unschedulable",
        "0/3 nodes are available: 3 Insufficient cpu.",
    );
    table(
        pod,
        &[
            (
                "unschedulable",
                a_pod("Pending", json!([unschedulable]), json!([])),
                Degraded,
                "unschedulable: 0/3 nodes are available: 3 Insufficient cpu.",
            ),
            (
                "not scheduled, no reason",
                a_pod(
                    "Pending",
                    json!([condition("PodScheduled", "False", "", "")]),
                    json!([]),
                ),
                Progressing,
                "not scheduled yet: PodScheduled=False",
            ),
        ],
    );
}

#[test]
fn the_projection_keeps_a_containers_states_and_restarts_not_its_images() {
    let projected = a_pod(
        "Running",
        json!([]),
        json!([waiting("web", "CrashLoopBackOff", 3)]),
    );
    let kept = &projected.status["containerStatuses"][0];
    assert_eq!(
        kept,
        &json!({ "name": "web", "ready": false, "restartCount": 3, "waiting": "CrashLoopBackOff" })
    );
    assert_eq!(
        projected.spec_field("restartPolicy"),
        Some(&json!("Always"))
    );
}
