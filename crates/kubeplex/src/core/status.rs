//! Per-cluster status on the parent: what the runtime writes after syncing or cleaning up children.

use std::collections::BTreeMap;

pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use super::child_health::Health;
use super::cluster_health::ClusterHealth;

/// The part of a parent's status kubeplex writes: one entry per child cluster, with its children's health,
/// and two conditions: `Applied` (the children are in place in every cluster) and `Ready` (applied, and
/// every child healthy). Embed it in your status with `#[serde(flatten)]` so the CRD schema admits it:
///
/// ```
/// #[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
/// pub struct AppDeploymentStatus {
///     #[serde(flatten)]
///     pub fleet: kubeplex::FleetStatus,
/// }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct FleetStatus {
    /// Each child cluster by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub clusters: BTreeMap<String, ClusterStatus>,
    /// `Applied`: true when the children are in place in every cluster; `Ready`: true when, besides, every
    /// child is healthy. A list keyed by `type`, so that other
    /// writers' conditions (the reconciler's own, another controller's) live beside kubeplex's: each writer
    /// applies only its own (server-side apply merges them by type). Each is a `meta/v1` `Condition`, with
    /// the schema Kubernetes gives one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
}

/// The children of one parent in one cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ClusterStatus {
    /// Where the children stand.
    pub state: ClusterState,
    /// How many children the parent has there.
    #[schemars(with = "i32")]
    pub children: u32,
    /// Why, when not `Applied`; when `Applied`, the children a policy left in place, if any (kept once no
    /// longer declared, told until the parent's spec changes again), and the shared children other
    /// parents share too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When `state` last changed.
    #[schemars(schema_with = "time_schema")]
    pub last_transition_time: Time,
    /// How the children there are doing, when the parent has children there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<ClusterHealth>,
    /// The cluster's identity (the UID of its `kube-system` Namespace) when known: two names showing one
    /// identity reach one cluster (docs/fleets.md, cluster identity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
}

impl ClusterStatus {
    /// `children` children in `state`, since `last_transition_time`, with no message.
    pub fn new(state: ClusterState, children: u32, last_transition_time: Time) -> Self {
        Self {
            state,
            children,
            message: None,
            last_transition_time,
            health: None,
            identity: None,
        }
    }

    /// A table's cell: the state, and beside it how many children are in the worst child's health —
    /// `Applied, 2 Healthy`, `Unreachable`. A health that waits for someone (`Degraded`, `Suspended`,
    /// `Terminating`) names the worst child and the first clause of its reason too: `Applied, 1 Degraded:
    /// namespace-a/web progress deadline exceeded`; `Progressing` does not, being on its way.
    pub fn line(&self) -> String {
        let state = self.state.as_str();
        let Some(health) = &self.health else {
            return state.to_owned();
        };
        let cell = format!("{state}, {} {}", health.count(health.state), health.state);
        let waits = matches!(
            health.state,
            Health::Degraded | Health::Suspended | Health::Terminating
        );
        match health.worst.as_deref().filter(|_| waits) {
            Some(worst) => {
                let (child, why) = worst.split_once(": ").unwrap_or((worst, ""));
                let why = why.split(": ").next().unwrap_or_default();
                format!("{cell}: {child} {why}").trim_end().to_owned()
            }
            None => cell,
        }
    }

    /// Says why the cluster is not `Applied`.
    #[must_use]
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }
}

/// Where a parent's children in one cluster stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub enum ClusterState {
    /// Every child is applied as desired; how they are doing is the cluster's `health` beside it. Written
    /// `Ready` by kubeplex before 0.2, which still reads as this.
    #[serde(alias = "Ready")]
    Applied,
    /// The cluster could not be reached; its children are as they were.
    Unreachable,
    /// The cluster answered but applying or deleting a child failed.
    Failed,
    /// The parent is being deleted and this cluster still has children (it blocks the deletion): they
    /// could not be deleted yet (the cluster is unreachable, a delete failed), or were deleted and are
    /// still there, kept by finalizers of their own. The message names them and says why.
    Deleting,
    /// The parent was deleted while this cluster was unreachable, or its children there still terminating,
    /// for longer than the abandon policy allows: its children were left behind.
    Abandoned,
    /// A child's name is taken by an object that is not this parent's (another parent's child, or one
    /// created by someone else): it was left alone.
    Conflict,
    /// The parent wants no children in this cluster (its spec narrows the clusters); any it had there
    /// were removed.
    NotTargeted,
    /// The member left the fleet under the orphan leave policy: its children stay in its cluster,
    /// no longer managed.
    Left,
    /// The member is leaving the fleet: no child is put there any more, and under the delete leave policy
    /// its children are deleted once it answers (the message says what it waits for).
    Leaving,
    /// The parent is being deleted and its children in this cluster are gone (or left in place, unlinked,
    /// as their delete policy says): the cluster no longer holds the deletion.
    Deleted,
}

/// A `meta/v1` `Time`, as the API server validates one. k8s-openapi's schemas are behind a feature that
/// would compile one for every Kubernetes type; these few are written out.
fn time_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "format": "date-time" })
}

/// A list of `meta/v1` `Condition`s keyed by `type`, with the validation Kubernetes declares for one
/// (`k8s.io/apimachinery/pkg/apis/meta/v1.Condition`).
fn conditions_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["type", "status", "lastTransitionTime", "reason", "message"],
            "properties": {
                "type": {
                    "description": "The condition's type, in CamelCase or foo.example.com/CamelCase.",
                    "type": "string",
                    "maxLength": 316,
                    "pattern": CONDITION_TYPE_PATTERN,
                },
                "status": {
                    "description": "True, False or Unknown.",
                    "type": "string",
                    "enum": ["True", "False", "Unknown"],
                },
                "reason": {
                    "description": "Why the condition last transitioned, in CamelCase.",
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 1024,
                    "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
                },
                "message": {
                    "description": "A human-readable message; may be empty.",
                    "type": "string",
                    "maxLength": MAX_MESSAGE,
                },
                "lastTransitionTime": {
                    "description": "When the status last changed.",
                    "type": "string",
                    "format": "date-time",
                },
                "observedGeneration": {
                    "description": "The metadata.generation the condition was computed for.",
                    "type": "integer",
                    "format": "int64",
                    "minimum": 0,
                },
            },
        },
    })
}

/// What the API server accepts as a condition's type.
const CONDITION_TYPE_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$";

/// The longest condition message the API server accepts (bytes).
const MAX_MESSAGE: usize = 32768;

impl ClusterState {
    /// The state as the status writes it, e.g. `Applied`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Applied => "Applied",
            Self::Unreachable => "Unreachable",
            Self::Failed => "Failed",
            Self::Deleting => "Deleting",
            Self::Abandoned => "Abandoned",
            Self::Conflict => "Conflict",
            Self::NotTargeted => "NotTargeted",
            Self::Left => "Left",
            Self::Leaving => "Leaving",
            Self::Deleted => "Deleted",
        }
    }
}

impl ClusterState {
    /// Whether the cluster is as the parent wants it (children in place, or none wanted there).
    pub fn is_settled(self) -> bool {
        matches!(
            self,
            Self::Applied | Self::Deleted | Self::NotTargeted | Self::Left | Self::Leaving
        )
    }
}

/// The condition that says the children are in place and healthy.
pub(super) const READY: &str = "Ready";
/// The condition that says the children are in place.
pub(super) const APPLIED: &str = "Applied";

/// The outcome of syncing (or cleaning up) one cluster.
#[derive(Clone, Debug)]
pub(crate) struct ClusterOutcome {
    pub(crate) state: ClusterState,
    pub(crate) children: u32,
    pub(crate) message: Option<String>,
    /// The fence's refusal, when a write there was refused because this replica is no longer the writer
    /// (not the leader, or not the owner of the parent's shard): nothing of this reconcile may be written.
    pub(crate) fenced: Option<&'static str>,
}

impl FleetStatus {
    /// The part of a parent's status that kubeplex writes (its clusters and its `Ready` condition), read
    /// from the whole status; what other writers put there is not kubeplex's to compare or rewrite, nor
    /// to fail on (a condition of theirs that does not parse leaves kubeplex's part as it is).
    pub(crate) fn owned_part(status: Option<&serde_json::Value>) -> FleetStatus {
        let Some(status) = status else {
            return FleetStatus::default();
        };
        let clusters = (status.get("clusters"))
            .and_then(|clusters| serde_json::from_value(clusters.clone()).ok())
            .unwrap_or_default();
        let conditions = (status.get("conditions"))
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .filter(|c| {
                let type_ = c.get("type").and_then(serde_json::Value::as_str);
                type_ == Some(READY) || type_ == Some(APPLIED)
            })
            .filter_map(|c| serde_json::from_value(c.clone()).ok())
            .collect();
        FleetStatus {
            clusters,
            conditions,
        }
    }

    /// The generation of the parent the `Applied` condition was written for, if it says.
    pub(crate) fn observed_generation(&self) -> Option<i64> {
        let ready = self.conditions.iter().find(|c| c.type_ == APPLIED);
        ready.and_then(|c| c.observed_generation)
    }

    /// After a failed reconcile: the clusters as they were, and `Applied=False` and `Ready=False` saying why.
    pub(crate) fn reconcile_failed(
        previous: &FleetStatus,
        message: &str,
        generation: Option<i64>,
        now: &Time,
    ) -> FleetStatus {
        let failed = |type_| {
            let said = ("False", "ReconcileFailed", message.to_owned());
            condition(previous, type_, said, generation, now)
        };
        FleetStatus {
            clusters: previous.clusters.clone(),
            conditions: vec![failed(APPLIED), failed(READY)],
        }
    }

    /// The status for these outcomes and the children's health in each cluster, keeping the transition
    /// times of states that did not change.
    pub(crate) fn from_outcomes(
        previous: &FleetStatus,
        outcomes: &BTreeMap<String, ClusterOutcome>,
        health: &BTreeMap<String, ClusterHealth>,
        generation: Option<i64>,
        now: &Time,
    ) -> FleetStatus {
        let clusters: BTreeMap<String, ClusterStatus> = outcomes
            .iter()
            .map(|(context, outcome)| {
                let since = (previous.clusters.get(context))
                    .filter(|old| old.state == outcome.state)
                    .map_or(now, |old| &old.last_transition_time);
                let status = ClusterStatus {
                    state: outcome.state,
                    children: outcome.children,
                    message: outcome.message.clone(),
                    last_transition_time: since.clone(),
                    health: health.get(context).cloned(),
                    identity: None,
                };
                (context.clone(), status)
            })
            .collect();
        let not_ready: Vec<String> = clusters
            .iter()
            .filter(|(_, c)| !c.state.is_settled())
            .map(|(name, c)| {
                format!(
                    "{name}: {}{}",
                    c.state.as_str(),
                    c.message
                        .as_ref()
                        .map(|m| format!(" ({m})"))
                        .unwrap_or_default()
                )
            })
            .collect();
        let (status, reason, message) = if not_ready.is_empty() {
            (
                "True",
                "AllClustersApplied",
                "children are in place in every cluster".to_owned(),
            )
        } else if clusters.values().any(|c| c.state == ClusterState::Deleting) {
            ("False", "DeletionBlocked", not_ready.join("; "))
        } else if clusters.values().any(|c| c.state == ClusterState::Conflict) {
            ("False", "ChildConflict", not_ready.join("; "))
        } else {
            ("False", "ClustersNotApplied", not_ready.join("; "))
        };
        let applied = (status, reason, message);
        let ready = ready_said(&clusters, &applied);
        FleetStatus {
            conditions: vec![
                condition(previous, APPLIED, applied, generation, now),
                condition(previous, READY, ready, generation, now),
            ],
            clusters,
        }
    }
}

/// What `Ready` says, given what `Applied` says: not ready while not applied (for the same reason), then
/// until every child in every cluster is healthy.
fn ready_said<'a>(
    clusters: &BTreeMap<String, ClusterStatus>,
    applied: &(&'a str, &'a str, String),
) -> (&'a str, &'a str, String) {
    if applied.0 != "True" {
        return applied.clone();
    }
    // Only the clusters the parent's children must run in: not one it does not target, or a member
    // leaving or gone, whose children are going or no longer managed.
    let unhealthy: Vec<(&String, &ClusterHealth)> = (clusters.iter())
        .filter(|(_, c)| c.state == ClusterState::Applied)
        .filter_map(|(name, c)| Some((name, c.health.as_ref()?)))
        .filter(|(_, h)| h.state != Health::Healthy)
        .collect();
    if unhealthy.is_empty() {
        return (
            "True",
            "AllChildrenHealthy",
            "children are in place and healthy in every cluster".to_owned(),
        );
    }
    let reason = if unhealthy.iter().any(|(_, h)| h.state == Health::Degraded) {
        "ChildrenDegraded"
    } else if unhealthy.iter().all(|(_, h)| h.state == Health::Suspended) {
        "ChildrenSuspended"
    } else {
        "ChildrenNotHealthy"
    };
    let message = (unhealthy.iter())
        .map(|(name, health)| format!("{name}: {}", health.summary()))
        .collect::<Vec<_>>()
        .join("; ");
    ("False", reason, message)
}

/// The condition `type_` with this (status, reason, message), its transition time kept while the status
/// stays the same. `reason` is a non-empty CamelCase word, as the API server requires.
fn condition(
    previous: &FleetStatus,
    type_: &str,
    (status, reason, mut message): (&str, &str, String),
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    let since = (previous.conditions.iter())
        .find(|c| c.type_ == type_)
        .filter(|c| c.status == status)
        .map_or(now, |c| &c.last_transition_time);
    // The API server would refuse the whole status for a longer one.
    super::failure::cut(&mut message, MAX_MESSAGE, "...");
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        last_transition_time: since.clone(),
        observed_generation: generation,
    }
}

/// Now, to the second: a `Time` is written with whole seconds, so a status compares equal to itself once
/// read back.
pub(crate) fn now() -> Time {
    let now = Timestamp::now();
    Time(Timestamp::from_second(now.as_second()).unwrap_or(now))
}

#[cfg(test)]
mod tests;
