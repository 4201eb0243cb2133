//! The rules of CustomResourceDefinitions, APIServices, HorizontalPodAutoscalers, PodDisruptionBudgets,
//! CronJobs and Ingresses, over what their controllers write.

use serde_json::json;

use super::{child, condition, table};
use crate::core::child_health::Health::{Degraded, Healthy, Progressing, Suspended};
use crate::core::health_rules::{
    api_service, cron_job, custom_resource_definition, horizontal_pod_autoscaler, ingress,
    pod_disruption_budget,
};

fn with_conditions(conditions: serde_json::Value) -> super::Projection {
    child(1, json!({}), json!({ "conditions": conditions }))
}

#[test]
fn a_custom_resource_definition_is_healthy_once_established() {
    table(
        custom_resource_definition,
        &[
            (
                "no conditions",
                with_conditions(json!([])),
                Progressing,
                "not established yet",
            ),
            (
                "installing",
                with_conditions(json!([
                    condition("NamesAccepted", "True", "NoConflicts", ""),
                    condition(
                        "Established",
                        "False",
                        "Installing",
                        "the initial names have not been accepted"
                    )
                ])),
                Progressing,
                "not established yet: the initial names have not been accepted",
            ),
            (
                "names clash",
                with_conditions(json!([condition(
                    "NamesAccepted",
                    "False",
                    "PluralConflict",
                    "\"widgets\" is already in use"
                )])),
                Degraded,
                "names not accepted: \"widgets\" is already in use",
            ),
            (
                "established",
                with_conditions(json!([condition(
                    "Established",
                    "True",
                    "InitialNamesAccepted",
                    ""
                )])),
                Healthy,
                "established",
            ),
        ],
    );
}

#[test]
fn an_api_service_is_healthy_when_available() {
    table(
        api_service,
        &[
            (
                "unchecked",
                with_conditions(json!([])),
                Progressing,
                "not checked by the aggregator yet",
            ),
            (
                "its service is missing",
                with_conditions(json!([condition(
                    "Available",
                    "False",
                    "ServiceNotFound",
                    "service kube-system/metrics-server is not present"
                )])),
                Degraded,
                "not available: service kube-system/metrics-server is not present",
            ),
            (
                "available",
                with_conditions(json!([condition(
                    "Available",
                    "True",
                    "Passed",
                    "all checks passed"
                )])),
                Healthy,
                "available",
            ),
        ],
    );
}

#[test]
fn an_autoscaler_that_cannot_scale_is_degraded() {
    let able = condition("AbleToScale", "True", "ReadyForNewScale", "");
    table(
        horizontal_pod_autoscaler,
        &[
            (
                "unobserved",
                with_conditions(json!([])),
                Progressing,
                "not observed by its controller yet",
            ),
            (
                "no metrics",
                with_conditions(json!([
                    able,
                    condition(
                        "ScalingActive",
                        "False",
                        "FailedGetResourceMetric",
                        "the HPA was unable to compute the replica count: no metrics returned"
                    )
                ])),
                Degraded,
                "scaling not active: the HPA was unable to compute the replica count: no metrics returned",
            ),
            (
                "its target is gone",
                with_conditions(json!([condition(
                    "AbleToScale",
                    "False",
                    "FailedGetScale",
                    "deployments/web not found"
                )])),
                Degraded,
                "cannot scale: deployments/web not found",
            ),
            (
                "turned off at zero replicas",
                child(
                    1,
                    json!({}),
                    json!({ "currentReplicas": 0, "conditions": [able, condition("ScalingActive", "False", "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")] }),
                ),
                Healthy,
                "0 current replicas",
            ),
            (
                "scaling",
                child(
                    1,
                    json!({}),
                    json!({ "currentReplicas": 3, "conditions": [able, condition("ScalingActive", "True", "ValidMetricFound", "")] }),
                ),
                Healthy,
                "3 current replicas",
            ),
        ],
    );
}

#[test]
fn a_disruption_budget_is_degraded_with_fewer_healthy_pods_than_it_wants() {
    table(
        pod_disruption_budget,
        &[
            (
                "unobserved",
                child(1, json!({}), json!({})),
                Progressing,
                "not observed by its controller yet",
            ),
            (
                "as the API server creates it",
                child(
                    1,
                    json!({}),
                    json!({ "currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0,
                            "expectedPods": 0 }),
                ),
                Progressing,
                "not observed by its controller yet",
            ),
            (
                "a spec not observed yet",
                child(
                    2,
                    json!({}),
                    json!({ "observedGeneration": 1, "currentHealthy": 3, "desiredHealthy": 2 }),
                ),
                Progressing,
                "generation 2 not observed yet (observed 1)",
            ),
            (
                "short",
                child(
                    1,
                    json!({}),
                    json!({ "observedGeneration": 1, "currentHealthy": 1, "desiredHealthy": 2 }),
                ),
                Degraded,
                "1/2 pods healthy",
            ),
            (
                "met",
                child(
                    1,
                    json!({}),
                    json!({ "observedGeneration": 1, "currentHealthy": 3, "desiredHealthy": 2 }),
                ),
                Healthy,
                "3/2 pods healthy",
            ),
        ],
    );
}

#[test]
fn a_suspended_cron_job_is_suspended_and_a_scheduled_one_is_healthy() {
    table(
        cron_job,
        &[
            (
                "suspended",
                child(1, json!({ "suspend": true }), json!({})),
                Suspended,
                "suspended: no Job is scheduled",
            ),
            (
                "never run",
                child(1, json!({ "suspend": false }), json!({})),
                Healthy,
                "scheduled, none run yet",
            ),
            (
                "run",
                child(
                    1,
                    json!({}),
                    json!({ "lastScheduleTime": "2026-12-06T10:00:00Z" }),
                ),
                Healthy,
                "scheduled, last at 2026-12-06T10:00:00Z",
            ),
        ],
    );
}

#[test]
fn an_ingress_is_healthy_once_addressed() {
    table(
        ingress,
        &[
            (
                "no address",
                child(1, json!({}), json!({ "loadBalancer": {} })),
                Progressing,
                "waiting for an address from its ingress controller",
            ),
            (
                "addressed",
                child(
                    1,
                    json!({}),
                    json!({ "loadBalancer": { "ingress": [{ "ip": "10.0.0.1" }] } }),
                ),
                Healthy,
                "address assigned",
            ),
        ],
    );
}

#[test]
fn a_condition_without_reason_or_message_is_told_by_its_type_and_status() {
    table(
        crate::core::health_rules::replica_set,
        &[(
            "bare ReplicaFailure",
            child(
                1,
                json!({}),
                json!({ "observedGeneration": 1, "conditions": [condition("ReplicaFailure", "True", "", "")] }),
            ),
            Degraded,
            "ReplicaFailure=True",
        )],
    );
}
