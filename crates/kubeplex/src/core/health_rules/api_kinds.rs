//! Health of the kinds an operator creates beside its workloads: API extensions (CustomResourceDefinition,
//! APIService), scaling and disruption (HorizontalPodAutoscaler, PodDisruptionBudget), schedules (CronJob)
//! and entry points (Ingress), each from what its controller writes.

use crate::core::child_health::Assessment;
use crate::core::projection::Projection;

use super::observed::unobserved;

/// A CustomResourceDefinition: `Healthy` once `Established`; `Degraded` when its names are not accepted
/// (they clash with another's), else installing.
pub(crate) fn custom_resource_definition(child: &Projection) -> Assessment {
    if let Some(names) = child.condition("NamesAccepted")
        && names.status == "False"
    {
        return Assessment::degraded(format!(
            "names not accepted: {}",
            names.words("NamesAccepted")
        ));
    }
    match child.condition("Established") {
        Some(established) if established.is_true() => Assessment::healthy("established"),
        Some(established) => Assessment::progressing(format!(
            "not established yet: {}",
            established.words("Established")
        )),
        None => Assessment::progressing("not established yet"),
    }
}

/// An APIService: `Healthy` when `Available`, `Degraded` when the aggregator says it is not (its service
/// or endpoints are missing, or its discovery check fails), else waiting for the aggregator.
pub(crate) fn api_service(child: &Projection) -> Assessment {
    match child.condition("Available") {
        Some(available) if available.is_true() => Assessment::healthy("available"),
        Some(available) => {
            Assessment::degraded(format!("not available: {}", available.words("Available")))
        }
        None => Assessment::progressing("not checked by the aggregator yet"),
    }
}

/// A HorizontalPodAutoscaler (`autoscaling/v2`): `Degraded` when it cannot scale (`AbleToScale` false) or
/// cannot compute a scale (`ScalingActive` false for another reason than being turned off at zero
/// replicas); `Healthy` otherwise once its controller reported, else `Progressing`.
pub(crate) fn horizontal_pod_autoscaler(child: &Projection) -> Assessment {
    if let Some(able) = child.condition("AbleToScale")
        && able.status == "False"
    {
        return Assessment::degraded(format!("cannot scale: {}", able.words("AbleToScale")));
    }
    if let Some(active) = child.condition("ScalingActive")
        && active.status == "False"
        && active.reason != "ScalingDisabled"
    {
        return Assessment::degraded(format!(
            "scaling not active: {}",
            active.words("ScalingActive")
        ));
    }
    if child.condition("AbleToScale").is_none() && child.condition("ScalingActive").is_none() {
        return Assessment::progressing("not observed by its controller yet");
    }
    Assessment::healthy(format!(
        "{} current replicas",
        child.status_i64("currentReplicas").unwrap_or(0)
    ))
}

/// A PodDisruptionBudget: `Healthy` when as many pods are healthy as it wants, `Degraded` when fewer —
/// once the disruption controller has observed its spec (the API server writes zero counts at creation).
pub(crate) fn pod_disruption_budget(child: &Projection) -> Assessment {
    if let Some(unobserved) = unobserved(child) {
        return unobserved;
    }
    let (Some(current), Some(desired)) = (
        child.status_i64("currentHealthy"),
        child.status_i64("desiredHealthy"),
    ) else {
        return Assessment::progressing("not observed by its controller yet");
    };
    let words = format!("{current}/{desired} pods healthy");
    if current < desired {
        Assessment::degraded(words)
    } else {
        Assessment::healthy(words)
    }
}

/// A CronJob: `Suspended` while its spec suspends it (it schedules nothing), `Healthy` otherwise; its Jobs
/// are judged as Jobs.
pub(crate) fn cron_job(child: &Projection) -> Assessment {
    if child
        .spec_field("suspend")
        .and_then(serde_json::Value::as_bool)
        == Some(true)
    {
        return Assessment::suspended("suspended: no Job is scheduled");
    }
    match child.status_str("lastScheduleTime") {
        Some(last) => Assessment::healthy(format!("scheduled, last at {last}")),
        None => Assessment::healthy("scheduled, none run yet"),
    }
}

/// An Ingress: `Healthy` once its controller gave it an address, else waiting for one.
pub(crate) fn ingress(child: &Projection) -> Assessment {
    let addressed = (child.status_field("loadBalancer"))
        .and_then(|lb| lb.get("ingress"))
        .and_then(serde_json::Value::as_array)
        .is_some_and(|ingress| !ingress.is_empty());
    if addressed {
        Assessment::healthy("address assigned")
    } else {
        Assessment::progressing("waiting for an address from its ingress controller")
    }
}
