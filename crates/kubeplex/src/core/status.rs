//! Per-cluster status on the parent: what the runtime writes after syncing or cleaning up children.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The part of a parent's status kubeplex writes: one entry per child context, and an overall `Ready`
/// condition. Embed it in your status with `#[serde(flatten)]` so the CRD schema admits it:
///
/// ```
/// #[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
/// pub struct AppDeploymentStatus {
///     #[serde(flatten)]
///     pub fleet: kubeplex::FleetStatus,
/// }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FleetStatus {
    /// Each child context by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub clusters: BTreeMap<String, ClusterStatus>,
    /// `Ready`: true when the children are in place in every context. A list keyed by `type`, so that other
    /// writers' conditions (the reconciler's own, another controller's) live beside kubeplex's: each writer
    /// applies only its own (server-side apply merges them by type).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// The children of one parent in one context.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// Where the children stand.
    pub state: ClusterState,
    /// How many children the parent has there.
    #[schemars(with = "i32")]
    pub children: u32,
    /// Why, when not `Ready`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When `state` last changed (RFC 3339).
    pub last_transition_time: String,
}

/// Where a parent's children in one context stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub enum ClusterState {
    /// Every child is applied as desired.
    Ready,
    /// The context could not be reached; its children are as they were.
    Unreachable,
    /// The context answered but applying or deleting a child failed.
    Failed,
    /// The parent is being deleted and this context still has children (it blocks the deletion).
    Deleting,
    /// The parent was deleted while this context was unreachable for longer than the abandon policy allows:
    /// its children were left behind.
    Abandoned,
    /// A child's name is taken by an object that is not this parent's (another parent's child, or one
    /// created by someone else): it was left alone.
    Conflict,
    /// The parent wants no children in this context (its spec narrows the clusters); any it had there
    /// were removed.
    NotTargeted,
    /// The member left the fleet under the orphan leave policy: its children stay in its cluster,
    /// no longer managed.
    Left,
    /// The member is leaving the fleet: no child is put there any more, and under the delete leave policy
    /// its children are deleted once it answers (the message says what it waits for).
    Leaving,
}

/// A status condition, as Kubernetes conventions shape them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's type, e.g. `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A `PascalCase` reason.
    pub reason: String,
    /// A human-readable message.
    #[serde(default)]
    pub message: String,
    /// When `status` last changed (RFC 3339).
    pub last_transition_time: String,
    /// The `metadata.generation` the condition was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl ClusterState {
    /// The state as the status writes it, e.g. `Ready`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "Ready",
            Self::Unreachable => "Unreachable",
            Self::Failed => "Failed",
            Self::Deleting => "Deleting",
            Self::Abandoned => "Abandoned",
            Self::Conflict => "Conflict",
            Self::NotTargeted => "NotTargeted",
            Self::Left => "Left",
            Self::Leaving => "Leaving",
        }
    }
}

impl ClusterState {
    /// Whether the context is as the parent wants it (children in place, or none wanted there).
    pub fn is_settled(self) -> bool {
        matches!(
            self,
            Self::Ready | Self::NotTargeted | Self::Left | Self::Leaving
        )
    }
}

/// The condition type kubeplex writes.
pub(super) const READY: &str = "Ready";

/// The outcome of syncing (or cleaning up) one context.
#[derive(Clone, Debug)]
pub(crate) struct ContextOutcome {
    pub(crate) state: ClusterState,
    pub(crate) children: u32,
    pub(crate) message: Option<String>,
    /// The fence's refusal, when a write there was refused because this replica is no longer the writer
    /// (not the leader, or not the owner of the parent's shard): nothing of this reconcile may be written.
    pub(crate) fenced: Option<&'static str>,
}

impl FleetStatus {
    /// The part of a parent's status that kubeplex writes (its clusters and its `Ready` condition), read
    /// from the whole status; what other writers put there is not kubeplex's to compare or rewrite.
    pub(crate) fn owned_part(status: Option<&serde_json::Value>) -> FleetStatus {
        let mut status: FleetStatus = status
            .and_then(|s| serde_json::from_value(s.clone()).ok())
            .unwrap_or_default();
        status.conditions.retain(|c| c.type_ == READY);
        status
    }

    /// After a failed reconcile: the clusters as they were, and `Ready=False` saying why.
    pub(crate) fn reconcile_failed(
        previous: &FleetStatus,
        message: &str,
        generation: Option<i64>,
        now: &str,
    ) -> FleetStatus {
        FleetStatus {
            clusters: previous.clusters.clone(),
            conditions: vec![ready_condition(
                previous,
                ("False", "ReconcileFailed", message.to_owned()),
                generation,
                now,
            )],
        }
    }

    /// The status for these outcomes, keeping the transition times of states that did not change.
    pub(crate) fn from_outcomes(
        previous: &FleetStatus,
        outcomes: &BTreeMap<String, ContextOutcome>,
        generation: Option<i64>,
        now: &str,
    ) -> FleetStatus {
        let clusters: BTreeMap<String, ClusterStatus> = outcomes
            .iter()
            .map(|(context, outcome)| {
                let since = previous
                    .clusters
                    .get(context)
                    .filter(|old| old.state == outcome.state)
                    .map_or_else(|| now.to_owned(), |old| old.last_transition_time.clone());
                let status = ClusterStatus {
                    state: outcome.state,
                    children: outcome.children,
                    message: outcome.message.clone(),
                    last_transition_time: since,
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
                "AllClustersReady",
                "children are in place in every cluster".to_owned(),
            )
        } else if clusters.values().any(|c| c.state == ClusterState::Deleting) {
            ("False", "DeletionBlocked", not_ready.join("; "))
        } else if clusters.values().any(|c| c.state == ClusterState::Conflict) {
            ("False", "ChildConflict", not_ready.join("; "))
        } else {
            ("False", "ClustersNotReady", not_ready.join("; "))
        };
        let ready = ready_condition(previous, (status, reason, message), generation, now);
        FleetStatus {
            clusters,
            conditions: vec![ready],
        }
    }
}

/// The `Ready` condition with this (status, reason, message), its transition time kept while the status
/// stays the same.
fn ready_condition(
    previous: &FleetStatus,
    (status, reason, message): (&str, &str, String),
    generation: Option<i64>,
    now: &str,
) -> Condition {
    let since = previous
        .conditions
        .iter()
        .find(|c| c.type_ == READY)
        .filter(|c| c.status == status)
        .map_or_else(|| now.to_owned(), |c| c.last_transition_time.clone());
    Condition {
        type_: READY.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        last_transition_time: since,
        observed_generation: generation,
    }
}

/// Now, as Kubernetes writes times.
pub(crate) fn now() -> String {
    let time =
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    serde_json::to_value(time)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(state: ClusterState, message: Option<&str>) -> ContextOutcome {
        ContextOutcome {
            fenced: None,
            state,
            children: 2,
            message: message.map(str::to_owned),
        }
    }

    #[test]
    fn transition_times_move_only_when_the_state_changes() {
        let outcomes: BTreeMap<String, ContextOutcome> = [
            ("cluster-a".to_owned(), outcome(ClusterState::Ready, None)),
            (
                "cluster-b".to_owned(),
                outcome(ClusterState::Unreachable, Some("connection refused")),
            ),
        ]
        .into();
        let first = FleetStatus::from_outcomes(&FleetStatus::default(), &outcomes, Some(1), "t1");
        assert_eq!(first.conditions[0].status, "False");
        assert_eq!(first.conditions[0].reason, "ClustersNotReady");
        assert!(
            first.conditions[0]
                .message
                .contains("cluster-b: Unreachable (connection refused)")
        );

        let mut outcomes = outcomes;
        outcomes.insert("cluster-b".into(), outcome(ClusterState::Ready, None));
        let second = FleetStatus::from_outcomes(&first, &outcomes, Some(1), "t2");
        assert_eq!(second.clusters["cluster-a"].last_transition_time, "t1");
        assert_eq!(second.clusters["cluster-b"].last_transition_time, "t2");
        assert_eq!(
            (
                second.conditions[0].status.as_str(),
                second.conditions[0].last_transition_time.as_str()
            ),
            ("True", "t2")
        );
        assert!(now().ends_with('Z'), "{}", now());
    }

    #[test]
    fn a_failed_reconcile_turns_ready_false_and_keeps_the_clusters() {
        let outcomes: BTreeMap<String, ContextOutcome> =
            [("cluster-a".to_owned(), outcome(ClusterState::Ready, None))].into();
        let ready = FleetStatus::from_outcomes(&FleetStatus::default(), &outcomes, Some(1), "t1");
        let failed = FleetStatus::reconcile_failed(&ready, "image is empty", Some(2), "t2");
        assert_eq!(failed.clusters, ready.clusters);
        let condition = &failed.conditions[0];
        assert_eq!(
            (
                condition.status.as_str(),
                condition.reason.as_str(),
                condition.message.as_str()
            ),
            ("False", "ReconcileFailed", "image is empty")
        );
        assert_eq!(
            (
                condition.last_transition_time.as_str(),
                condition.observed_generation
            ),
            ("t2", Some(2))
        );
    }

    #[test]
    fn only_kubeplexs_own_condition_is_compared_and_rewritten() {
        let status = serde_json::json!({
            "clusters": {},
            "conditions": [
                { "type": "Configured", "status": "True", "reason": "Mine", "lastTransitionTime": "t0" },
                { "type": "Ready", "status": "True", "reason": "AllClustersReady", "lastTransitionTime": "t1" },
            ],
            "somethingElse": 1,
        });
        let owned = FleetStatus::owned_part(Some(&status));
        assert_eq!(owned.conditions.len(), 1);
        assert_eq!(owned.conditions[0].type_, READY);
        assert_eq!(FleetStatus::owned_part(None), FleetStatus::default());
    }

    #[test]
    fn the_schema_keys_conditions_by_type_for_server_side_apply() {
        let schema = serde_json::to_value(schemars::schema_for!(FleetStatus)).unwrap();
        let conditions = &schema["properties"]["conditions"];
        assert_eq!(conditions["x-kubernetes-list-type"], "map", "{conditions}");
        assert_eq!(
            conditions["x-kubernetes-list-map-keys"],
            serde_json::json!(["type"])
        );
    }
}
