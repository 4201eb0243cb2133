//! The built-in health rules: one per well-known kind, following what its controller writes, and kstatus'
//! rule for every other kind (custom resources included).
//!
//! Pods are judged in `pod.rs`, API extensions, autoscalers, budgets, CronJobs and Ingresses in
//! `api_kinds.rs`. Each is a pure function of a [`Projection`]. The workload rules first ask whether the kind's controller
//! has seen the latest spec (`status.observedGeneration`), then count replicas; kstatus reads the
//! `Ready`, `Reconciling` and `Stalled` conditions.

mod api_kinds;
mod observed;
mod pod;

use super::child_health::{Assessment, HealthRule};
use super::projection::Projection;
use api_kinds::{
    api_service, cron_job, custom_resource_definition, horizontal_pod_autoscaler, ingress,
    pod_disruption_budget,
};
use observed::unobserved;
use pod::pod;

/// The built-in rule of a kind, by its API group and kind; kstatus' for any other.
pub(crate) fn builtin_rule(group: &str, kind: &str) -> HealthRule {
    match (group, kind) {
        ("apps", "Deployment") => deployment,
        ("apps", "StatefulSet") => stateful_set,
        ("apps", "DaemonSet") => daemon_set,
        ("apps", "ReplicaSet") => replica_set,
        ("batch", "Job") => job,
        ("", "PersistentVolumeClaim") => persistent_volume_claim,
        ("", "Service") => service,
        ("", "Pod") => pod,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => custom_resource_definition,
        ("apiregistration.k8s.io", "APIService") => api_service,
        ("autoscaling", "HorizontalPodAutoscaler") => horizontal_pod_autoscaler,
        ("policy", "PodDisruptionBudget") => pod_disruption_budget,
        ("batch", "CronJob") => cron_job,
        ("networking.k8s.io", "Ingress") => ingress,
        _ => kstatus,
    }
}

/// `spec.replicas`, 1 when unset (as the API server defaults it).
fn wanted_replicas(child: &Projection) -> i64 {
    child.spec_i64("replicas").unwrap_or(1)
}

fn count(child: &Projection, field: &str) -> i64 {
    child.status_i64(field).unwrap_or(0)
}

/// A Deployment: its rollout is done (every replica updated, no old one left) and every replica available;
/// `Degraded` past its progress deadline, or when its `Available` condition is false once the rollout is
/// complete. While the controller still rolls the new ReplicaSet out (`Progressing` true for another
/// reason than `NewReplicaSetAvailable`), `Available` is false until enough pods start: that is progress,
/// and the deadline says when it is not.
pub(crate) fn deployment(child: &Projection) -> Assessment {
    if let Some(not_yet) = unobserved(child) {
        return not_yet;
    }
    if let Some(progressing) = child.condition("Progressing")
        && progressing.reason == "ProgressDeadlineExceeded"
    {
        return Assessment::degraded(format!(
            "progress deadline exceeded: {}",
            progressing.message
        ));
    }
    let wanted = wanted_replicas(child);
    let (updated, available) = (
        count(child, "updatedReplicas"),
        count(child, "availableReplicas"),
    );
    if child
        .spec_field("paused")
        .and_then(serde_json::Value::as_bool)
        == Some(true)
    {
        return Assessment::suspended(format!(
            "rollout paused, {available}/{wanted} replicas available"
        ));
    }
    if updated < wanted {
        return Assessment::progressing(format!("{updated}/{wanted} replicas updated"));
    }
    let old = count(child, "replicas") - updated;
    if old > 0 {
        return Assessment::progressing(format!("{old} old replicas pending termination"));
    }
    if available < wanted {
        let reason = format!("{available}/{wanted} replicas available");
        let rolling_out = (child.condition("Progressing"))
            .is_some_and(|p| p.is_true() && p.reason != "NewReplicaSetAvailable");
        return match child.condition("Available") {
            Some(condition) if rolling_out || condition.is_true() => {
                Assessment::progressing(reason)
            }
            Some(condition) if !condition.message.is_empty() => {
                Assessment::degraded(format!("{reason}: {}", condition.message))
            }
            Some(_) => Assessment::degraded(reason),
            None => Assessment::progressing(reason),
        };
    }
    Assessment::healthy(format!("{available}/{wanted} replicas available"))
}

/// A StatefulSet: every replica ready, and updated as far as its update strategy goes — all of them for
/// `RollingUpdate`, none for `OnDelete` (a replica is updated when someone deletes it). A rollout held at a
/// partition on purpose, the replicas at or above it updated, is `Suspended`: it goes on when the partition
/// is lowered.
pub(crate) fn stateful_set(child: &Projection) -> Assessment {
    if let Some(not_yet) = unobserved(child) {
        return not_yet;
    }
    let wanted = wanted_replicas(child);
    let (updated, ready) = (
        count(child, "updatedReplicas"),
        count(child, "readyReplicas"),
    );
    if ready < wanted {
        return Assessment::progressing(format!("{ready}/{wanted} replicas ready"));
    }
    let strategy = child.spec_field("updateStrategy");
    let kind = strategy
        .and_then(|s| s.get("type"))
        .and_then(serde_json::Value::as_str);
    if kind == Some("OnDelete") {
        return Assessment::healthy(format!(
            "{ready}/{wanted} replicas ready; OnDelete: {updated} updated, the others when deleted"
        ));
    }
    let partition = (strategy.and_then(|s| s.get("rollingUpdate")))
        .and_then(|r| r.get("partition"))
        .and_then(serde_json::Value::as_i64)
        .unwrap_or(0)
        .clamp(0, wanted);
    let to_update = wanted - partition;
    if updated < to_update {
        return Assessment::progressing(format!("{updated}/{to_update} replicas updated"));
    }
    if partition > 0 && updated < wanted {
        return Assessment::suspended(format!(
            "{ready}/{wanted} replicas ready; held at partition {partition}: {updated} updated"
        ));
    }
    Assessment::healthy(format!("{ready}/{wanted} replicas ready"))
}

/// A DaemonSet: its pod updated and available on every node it should run on.
pub(crate) fn daemon_set(child: &Projection) -> Assessment {
    if let Some(not_yet) = unobserved(child) {
        return not_yet;
    }
    let desired = count(child, "desiredNumberScheduled");
    let updated = count(child, "updatedNumberScheduled");
    let available = count(child, "numberAvailable");
    if updated < desired {
        return Assessment::progressing(format!("{updated}/{desired} pods updated"));
    }
    if available < desired {
        return Assessment::progressing(format!("{available}/{desired} pods available"));
    }
    Assessment::healthy(format!("{available}/{desired} pods available"))
}

/// A ReplicaSet: every replica available; `Degraded` when its `ReplicaFailure` condition is true.
pub(crate) fn replica_set(child: &Projection) -> Assessment {
    if let Some(not_yet) = unobserved(child) {
        return not_yet;
    }
    if let Some(failure) = child.condition("ReplicaFailure")
        && failure.is_true()
    {
        return Assessment::degraded(match (failure.reason, failure.message) {
            ("", "") => "ReplicaFailure=True".to_owned(),
            (reason, "") | ("", reason) => reason.to_owned(),
            (reason, message) => format!("{reason}: {message}"),
        });
    }
    let wanted = wanted_replicas(child);
    let available = count(child, "availableReplicas");
    let reason = format!("{available}/{wanted} replicas available");
    if available < wanted {
        Assessment::progressing(reason)
    } else {
        Assessment::healthy(reason)
    }
}

/// A Job: `Healthy` once complete, `Degraded` once failed, `Suspended` while its spec suspends it, else
/// running.
pub(crate) fn job(child: &Projection) -> Assessment {
    if let Some(failed) = child.condition("Failed")
        && failed.is_true()
    {
        let reason = if failed.message.is_empty() {
            failed.reason
        } else {
            failed.message
        };
        return Assessment::degraded(format!("failed: {reason}"));
    }
    if child.condition("Complete").is_some_and(|c| c.is_true()) {
        return Assessment::healthy(format!("complete, {} succeeded", count(child, "succeeded")));
    }
    let suspend = child
        .spec_field("suspend")
        .and_then(serde_json::Value::as_bool);
    if suspend == Some(true) || child.condition("Suspended").is_some_and(|c| c.is_true()) {
        return Assessment::suspended(format!(
            "suspended: {} active, {} succeeded",
            count(child, "active"),
            count(child, "succeeded")
        ));
    }
    Assessment::progressing(format!(
        "running: {} active, {} succeeded",
        count(child, "active"),
        count(child, "succeeded")
    ))
}

/// A PersistentVolumeClaim: `Healthy` once bound, `Degraded` once lost.
pub(crate) fn persistent_volume_claim(child: &Projection) -> Assessment {
    match child.status_str("phase") {
        Some("Bound") => Assessment::healthy("bound"),
        Some("Lost") => Assessment::degraded("claim lost: its volume is gone"),
        Some(phase) => Assessment::progressing(format!("{phase}: not bound yet")),
        None => Assessment::progressing("not bound yet"),
    }
}

/// A Service: a `LoadBalancer` is healthy once it has an ingress; any other type at once.
pub(crate) fn service(child: &Projection) -> Assessment {
    if child.spec_field("type").and_then(serde_json::Value::as_str) != Some("LoadBalancer") {
        return Assessment::healthy("service");
    }
    let ingress = child
        .status_field("loadBalancer")
        .and_then(|lb| lb.get("ingress"))
        .and_then(serde_json::Value::as_array)
        .is_some_and(|ingress| !ingress.is_empty());
    if ingress {
        Assessment::healthy("load balancer ingress assigned")
    } else {
        Assessment::progressing("waiting for a load balancer ingress")
    }
}

/// kstatus' rule, for any kind: the latest generation observed, then `Stalled` (degraded), `Reconciling`
/// and `Ready` (progressing until true); a kind with none of these is healthy as it is.
pub(crate) fn kstatus(child: &Projection) -> Assessment {
    if !child.generation_observed() {
        return Assessment::progressing(format!(
            "generation {} not observed yet (observed {})",
            child.generation().unwrap_or_default(),
            child.observed_generation().unwrap_or_default()
        ));
    }
    if let Some(stalled) = child.condition("Stalled")
        && stalled.is_true()
    {
        return Assessment::degraded(format!("stalled: {}", stalled.words("Stalled")));
    }
    if let Some(reconciling) = child.condition("Reconciling")
        && reconciling.is_true()
    {
        return Assessment::progressing(format!(
            "reconciling: {}",
            reconciling.words("Reconciling")
        ));
    }
    match child.condition("Ready") {
        Some(ready) if ready.is_true() => Assessment::healthy("ready"),
        Some(ready) => Assessment::progressing(format!("not ready: {}", ready.words("Ready"))),
        None => Assessment::healthy("current"),
    }
}

#[cfg(test)]
mod tests;
