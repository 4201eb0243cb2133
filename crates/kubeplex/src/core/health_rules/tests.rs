use serde_json::json;

mod api_kinds;
mod kstatus;
mod pod;
mod stateful_set;

use super::*;
use crate::core::child_health::Health;

/// A projection of `{metadata: {generation}, spec, status}`.
pub(super) fn child(
    generation: i64,
    spec: serde_json::Value,
    status: serde_json::Value,
) -> Projection {
    Projection::of_value(json!({
        "metadata": { "name": "web", "namespace": "a", "generation": generation },
        "spec": spec,
        "status": status,
    }))
}

/// Runs `rule` over each case: (what, projection, expected health, expected reason).
pub(super) fn table(rule: HealthRule, cases: &[(&str, Projection, Health, &str)]) {
    for (what, projection, health, reason) in cases {
        let verdict = rule(projection);
        assert_eq!(
            (verdict.health, verdict.reason.as_str()),
            (*health, *reason),
            "{what}"
        );
    }
}

pub(super) fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
) -> serde_json::Value {
    json!({ "type": type_, "status": status, "reason": reason, "message": message })
}

#[test]
fn deployment() {
    use Health::*;
    let spec = json!({ "replicas": 3 });
    table(
        super::deployment,
        &[
            (
                "no status",
                child(1, spec.clone(), json!(null)),
                Progressing,
                "not observed by its controller yet",
            ),
            (
                "an empty status, as the API server writes one",
                child(1, spec.clone(), json!({})),
                Progressing,
                "not observed by its controller yet",
            ),
            (
                "an older generation observed",
                child(2, spec.clone(), json!({ "observedGeneration": 1 })),
                Progressing,
                "generation 2 not observed yet (observed 1)",
            ),
            (
                "updating",
                child(
                    1,
                    spec.clone(),
                    json!({ "observedGeneration": 1, "replicas": 3, "updatedReplicas": 1 }),
                ),
                Progressing,
                "1/3 replicas updated",
            ),
            (
                "old replicas left",
                child(
                    1,
                    spec.clone(),
                    json!({ "observedGeneration": 1, "replicas": 4, "updatedReplicas": 3 }),
                ),
                Progressing,
                "1 old replicas pending termination",
            ),
            (
                "not available yet",
                child(
                    1,
                    spec.clone(),
                    json!({ "observedGeneration": 1, "replicas": 3, "updatedReplicas": 3 }),
                ),
                Progressing,
                "0/3 replicas available",
            ),
            (
                "available",
                child(
                    1,
                    spec.clone(),
                    json!({ "observedGeneration": 1, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 3 }),
                ),
                Healthy,
                "3/3 replicas available",
            ),
            (
                "unavailable after the rollout",
                child(
                    1,
                    spec.clone(),
                    json!({ "observedGeneration": 1, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 1,
                    "conditions": [condition("Available", "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability.")] }),
                ),
                Degraded,
                "1/3 replicas available: Deployment does not have minimum availability.",
            ),
            (
                "unavailable once its rollout completed",
                child(
                    1,
                    spec.clone(),
                    json!({ "observedGeneration": 1, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 1,
                    "conditions": [condition("Progressing", "True", "NewReplicaSetAvailable", "ReplicaSet \"web-1\" has successfully progressed."),
                                   condition("Available", "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability.")] }),
                ),
                Degraded,
                "1/3 replicas available: Deployment does not have minimum availability.",
            ),
            (
                // As a Deployment controller writes a new Deployment whose pods are starting.
                "unavailable while its new ReplicaSet rolls out",
                child(
                    1,
                    spec.clone(),
                    json!({ "observedGeneration": 1, "replicas": 3, "updatedReplicas": 3, "unavailableReplicas": 3,
                    "conditions": [condition("Available", "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability."),
                                   condition("Progressing", "True", "ReplicaSetUpdated", "ReplicaSet \"web-1\" is progressing.")] }),
                ),
                Progressing,
                "0/3 replicas available",
            ),
            (
                "past its deadline",
                child(
                    1,
                    spec.clone(),
                    json!({ "observedGeneration": 1, "replicas": 3, "updatedReplicas": 1,
                    "conditions": [condition("Progressing", "False", "ProgressDeadlineExceeded", "ReplicaSet \"web-1\" has timed out progressing.")] }),
                ),
                Degraded,
                "progress deadline exceeded: ReplicaSet \"web-1\" has timed out progressing.",
            ),
            (
                "replicas unset means one",
                child(
                    1,
                    json!({}),
                    json!({ "observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1 }),
                ),
                Healthy,
                "1/1 replicas available",
            ),
            (
                "paused",
                child(
                    1,
                    json!({ "replicas": 3, "paused": true }),
                    json!({ "observedGeneration": 1 }),
                ),
                Suspended,
                "rollout paused, 0/3 replicas available",
            ),
        ],
    );
}

#[test]
fn stateful_set_daemon_set_and_replica_set() {
    use Health::*;
    let spec = json!({ "replicas": 2 });
    table(
        super::stateful_set,
        &[
            (
                "no status",
                child(1, spec.clone(), json!(null)),
                Progressing,
                "not observed by its controller yet",
            ),
            (
                "not ready",
                child(
                    1,
                    spec.clone(),
                    json!({ "observedGeneration": 1, "readyReplicas": 1, "updatedReplicas": 2 }),
                ),
                Progressing,
                "1/2 replicas ready",
            ),
            (
                "not updated",
                child(
                    1,
                    spec.clone(),
                    json!({ "observedGeneration": 1, "readyReplicas": 2, "updatedReplicas": 1 }),
                ),
                Progressing,
                "1/2 replicas updated",
            ),
            (
                "ready",
                child(
                    1,
                    spec.clone(),
                    json!({ "observedGeneration": 1, "readyReplicas": 2, "updatedReplicas": 2 }),
                ),
                Healthy,
                "2/2 replicas ready",
            ),
        ],
    );
    table(
        super::daemon_set,
        &[
            (
                "not updated",
                child(
                    1,
                    json!({}),
                    json!({ "observedGeneration": 1, "desiredNumberScheduled": 3, "updatedNumberScheduled": 2, "numberAvailable": 3 }),
                ),
                Progressing,
                "2/3 pods updated",
            ),
            (
                "not available",
                child(
                    1,
                    json!({}),
                    json!({ "observedGeneration": 1, "desiredNumberScheduled": 3, "updatedNumberScheduled": 3, "numberAvailable": 1 }),
                ),
                Progressing,
                "1/3 pods available",
            ),
            (
                "available",
                child(
                    1,
                    json!({}),
                    json!({ "observedGeneration": 1, "desiredNumberScheduled": 3, "updatedNumberScheduled": 3, "numberAvailable": 3 }),
                ),
                Healthy,
                "3/3 pods available",
            ),
            (
                "an older generation",
                child(4, json!({}), json!({ "observedGeneration": 3 })),
                Progressing,
                "generation 4 not observed yet (observed 3)",
            ),
        ],
    );
    table(
        super::replica_set,
        &[
            (
                "not available",
                child(
                    1,
                    spec.clone(),
                    json!({ "observedGeneration": 1, "availableReplicas": 1 }),
                ),
                Progressing,
                "1/2 replicas available",
            ),
            (
                "available",
                child(
                    1,
                    spec.clone(),
                    json!({ "observedGeneration": 1, "availableReplicas": 2 }),
                ),
                Healthy,
                "2/2 replicas available",
            ),
            (
                "failing",
                child(
                    1,
                    spec.clone(),
                    json!({ "observedGeneration": 1, "conditions": [condition("ReplicaFailure", "True", "FailedCreate", "quota exceeded")] }),
                ),
                Degraded,
                "FailedCreate: quota exceeded",
            ),
        ],
    );
}

#[test]
fn job_claim_and_service() {
    use Health::*;
    table(
        super::job,
        &[
            (
                "running",
                child(1, json!({}), json!({ "active": 1 })),
                Progressing,
                "running: 1 active, 0 succeeded",
            ),
            (
                "no status",
                child(1, json!({}), json!(null)),
                Progressing,
                "running: 0 active, 0 succeeded",
            ),
            (
                "complete",
                child(
                    1,
                    json!({}),
                    json!({ "succeeded": 1, "conditions": [condition("Complete", "True", "", "")] }),
                ),
                Healthy,
                "complete, 1 succeeded",
            ),
            (
                "failed",
                child(
                    1,
                    json!({}),
                    json!({ "failed": 6, "conditions": [condition("Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit")] }),
                ),
                Degraded,
                "failed: Job has reached the specified backoff limit",
            ),
            (
                "failed without a message",
                child(
                    1,
                    json!({}),
                    json!({ "conditions": [condition("Failed", "True", "DeadlineExceeded", "")] }),
                ),
                Degraded,
                "failed: DeadlineExceeded",
            ),
            (
                "suspended",
                child(
                    1,
                    json!({}),
                    json!({ "conditions": [condition("Suspended", "True", "JobSuspended", "")] }),
                ),
                Suspended,
                "suspended: 0 active, 0 succeeded",
            ),
            (
                "suspended by its spec, before the controller says so",
                child(1, json!({ "suspend": true }), json!({ "active": 1 })),
                Suspended,
                "suspended: 1 active, 0 succeeded",
            ),
        ],
    );
    table(
        super::persistent_volume_claim,
        &[
            (
                "bound",
                child(1, json!({}), json!({ "phase": "Bound" })),
                Healthy,
                "bound",
            ),
            (
                "pending",
                child(1, json!({}), json!({ "phase": "Pending" })),
                Progressing,
                "Pending: not bound yet",
            ),
            (
                "lost",
                child(1, json!({}), json!({ "phase": "Lost" })),
                Degraded,
                "claim lost: its volume is gone",
            ),
            (
                "no status",
                child(1, json!({}), json!(null)),
                Progressing,
                "not bound yet",
            ),
        ],
    );
    table(
        super::service,
        &[
            (
                "cluster IP",
                child(1, json!({ "type": "ClusterIP" }), json!({})),
                Healthy,
                "service",
            ),
            (
                "load balancer waiting",
                child(
                    1,
                    json!({ "type": "LoadBalancer" }),
                    json!({ "loadBalancer": {} }),
                ),
                Progressing,
                "waiting for a load balancer ingress",
            ),
            (
                "load balancer",
                child(
                    1,
                    json!({ "type": "LoadBalancer" }),
                    json!({ "loadBalancer": { "ingress": [{ "ip": "10.0.0.1" }] } }),
                ),
                Healthy,
                "load balancer ingress assigned",
            ),
        ],
    );
}
