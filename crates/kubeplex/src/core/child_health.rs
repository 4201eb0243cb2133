//! How a child is doing: its health, a rule's verdict on it, and each child as its cache has it. A rule is
//! a pure function of the child's projection (`projection.rs`, [`HealthRule`]); the built-in ones are in
//! `health_rules.rs`.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::projection::Projection;

/// How a child is doing, from best to worst as the parent's status orders them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub enum Health {
    /// Running as its spec asks: the rollout is done, the replicas are available, the job completed.
    Healthy,
    /// Held on purpose, neither running as its spec asks nor failing: a paused Deployment, a suspended Job
    /// or CronJob, a StatefulSet's rollout held at a partition. A rollout waiting for it halts, saying so.
    Suspended,
    /// On its way: a rollout in progress, replicas not yet available, a claim not yet bound.
    Progressing,
    /// Being deleted (it has a `deletionTimestamp`): kept a while yet by its finalizers or a grace period.
    Terminating,
    /// The cluster could not be asked: it is unreachable, or its cache has not listed yet. Not a
    /// verdict on the child.
    Unknown,
    /// Declared by the parent but not in the cluster (not created yet, or deleted by someone).
    Missing,
    /// Failed and not getting better by itself: a rollout past its deadline, a failed job, a lost claim,
    /// `Stalled`.
    Degraded,
}

impl Health {
    /// The health as the status writes it, e.g. `Progressing`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Healthy => "Healthy",
            Self::Suspended => "Suspended",
            Self::Progressing => "Progressing",
            Self::Terminating => "Terminating",
            Self::Unknown => "Unknown",
            Self::Missing => "Missing",
            Self::Degraded => "Degraded",
        }
    }

    /// How bad it is: the parent's status names the child whose health ranks highest.
    fn severity(self) -> u8 {
        match self {
            Self::Healthy => 0,
            Self::Suspended => 1,
            Self::Progressing => 2,
            Self::Terminating => 3,
            Self::Unknown => 4,
            Self::Missing => 5,
            Self::Degraded => 6,
        }
    }

    /// Every health, best first.
    pub const ALL: [Health; 7] = [
        Health::Healthy,
        Health::Suspended,
        Health::Progressing,
        Health::Terminating,
        Health::Unknown,
        Health::Missing,
        Health::Degraded,
    ];
}

impl std::fmt::Display for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A rule's verdict on one child: its health and the reason a person reads (`1/3 replicas available`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Assessment {
    /// How the child is doing.
    pub health: Health,
    /// Why, in a few words.
    pub reason: String,
}

impl Assessment {
    /// `health`, because of `reason`.
    pub fn new(health: Health, reason: impl Into<String>) -> Self {
        Self {
            health,
            reason: reason.into(),
        }
    }

    /// Healthy, because of `reason`.
    pub fn healthy(reason: impl Into<String>) -> Self {
        Self::new(Health::Healthy, reason)
    }

    /// Progressing, because of `reason`.
    pub fn progressing(reason: impl Into<String>) -> Self {
        Self::new(Health::Progressing, reason)
    }

    /// Degraded, because of `reason`.
    pub fn degraded(reason: impl Into<String>) -> Self {
        Self::new(Health::Degraded, reason)
    }

    /// Suspended, because of `reason`.
    pub fn suspended(reason: impl Into<String>) -> Self {
        Self::new(Health::Suspended, reason)
    }
}

/// `rule`'s verdict on a child, unless the child is being deleted: then `Terminating` whatever the rule
/// says (its status describes an object on its way out), naming the finalizers that keep it.
pub(crate) fn assess(rule: HealthRule, child: &Projection) -> Assessment {
    let meta = &child.metadata;
    if meta.deletion_timestamp.is_none() {
        return rule(child);
    }
    match meta.finalizers.as_deref().unwrap_or_default() {
        [] => Assessment::new(Health::Terminating, "being deleted"),
        kept => Assessment::new(
            Health::Terminating,
            format!("being deleted; finalizers: {}", kept.join(", ")),
        ),
    }
}

/// A health rule: a pure function of a child's projection. `owns(Kind, health = path::to::rule)` or
/// [`Child::health`](crate::Child::health) replaces the kind's built-in rule with one of these.
pub type HealthRule = fn(&Projection) -> Assessment;

/// One child of the parent in one cluster, as its cache has it: for [`Cx::children`](crate::Cx::children).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ChildHealth {
    /// Its namespace (`None` for a cluster-scoped kind).
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// How it is doing.
    pub health: Health,
    /// Why (`1/3 replicas available`).
    pub reason: String,
    /// What its health was judged from; `None` for a child declared but not cached ([`Health::Missing`]).
    pub projection: Option<Arc<Projection>>,
}

/// The longest reason a verdict keeps: a rule quotes what the cluster wrote (a condition's message, a
/// container's waiting reason), and the reason goes into the parent's status and Events.
pub const MAX_HEALTH_REASON: usize = 256;

impl ChildHealth {
    /// A cached child with its rule's verdict, its reason cut to [`MAX_HEALTH_REASON`] bytes.
    pub(crate) fn judged(projection: Arc<Projection>, verdict: Assessment) -> Self {
        let mut reason = verdict.reason;
        super::cut(&mut reason, MAX_HEALTH_REASON, " [cut]");
        Self {
            namespace: projection.metadata.namespace.clone(),
            name: projection.metadata.name.clone().unwrap_or_default(),
            health: verdict.health,
            reason,
            projection: Some(projection),
        }
    }

    /// A child with this health and reason and no projection (missing, or its cluster unknown).
    pub(crate) fn without_projection(
        namespace: Option<&str>,
        name: &str,
        verdict: Assessment,
    ) -> Self {
        Self {
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
            health: verdict.health,
            reason: verdict.reason,
            projection: None,
        }
    }

    /// `namespace/name`, or `name` for a cluster-scoped child.
    pub fn full_name(&self) -> String {
        match &self.namespace {
            Some(namespace) => format!("{namespace}/{}", self.name),
            None => self.name.clone(),
        }
    }

    /// Whether it is healthy.
    pub fn is_healthy(&self) -> bool {
        self.health == Health::Healthy
    }
}

/// The worst of `children` (the first of the worst, in their order), if any.
pub(crate) fn worst(children: &[ChildHealth]) -> Option<&ChildHealth> {
    children
        .iter()
        .rev()
        .max_by_key(|child| child.health.severity())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_being_deleted_is_terminating_whatever_its_rule_says() {
        fn healthy(_: &Projection) -> Assessment {
            Assessment::healthy("3/3 replicas available")
        }
        let mut child = Projection::default();
        assert_eq!(assess(healthy, &child), healthy(&child));
        let now = k8s_openapi::jiff::Timestamp::now();
        child.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now));
        assert_eq!(
            assess(healthy, &child),
            Assessment::new(Health::Terminating, "being deleted")
        );
        child.metadata.finalizers = Some(vec!["example.com/hold".into()]);
        assert_eq!(
            assess(healthy, &child).reason,
            "being deleted; finalizers: example.com/hold"
        );
        // Suspended and Terminating rank between the others: a suspended child is the worst only among
        // healthy ones, a terminating one above those progressing.
        let order: Vec<u8> = Health::ALL.iter().map(|h| h.severity()).collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    }

    #[test]
    fn a_verdict_quoting_a_long_message_from_the_cluster_is_cut() {
        let long = format!("degraded: {}", "é".repeat(400));
        let judged = ChildHealth::judged(Arc::default(), Assessment::degraded(long));
        assert!(
            judged.reason.len() <= MAX_HEALTH_REASON,
            "{}",
            judged.reason.len()
        );
        assert!(judged.reason.starts_with("degraded: é") && judged.reason.ends_with(" [cut]"));
        let short = ChildHealth::judged(Arc::default(), Assessment::healthy("ready"));
        assert_eq!(short.reason, "ready");
    }

    #[test]
    fn the_worst_child_is_the_first_of_the_worst_health() {
        let child = |name: &str, health| {
            ChildHealth::without_projection(Some("a"), name, Assessment::new(health, "why"))
        };
        let children = [
            child("one", Health::Progressing),
            child("two", Health::Degraded),
            child("three", Health::Degraded),
            child("four", Health::Missing),
        ];
        assert_eq!(worst(&children).unwrap().name, "two");
        assert_eq!(worst(&children[..1]).unwrap().name, "one");
        assert!(worst(&[]).is_none());
    }
}
