//! What the probes and `Running::readiness` report: per cluster, per watch, and the leadership.

use std::collections::BTreeMap;

use serde::Serialize;

/// The longest reason or problem reported, in bytes: a member's server writes part of it (its error
/// answer), and a probe body must stay small whoever the server is.
pub(super) const MAX_REASON: usize = 1024;

/// `reason`, cut to [`MAX_REASON`] bytes (on a character boundary, marked) when longer.
pub(super) fn capped(mut reason: String) -> String {
    crate::core::cut(&mut reason, MAX_REASON, " [cut]");
    reason
}

/// The readiness of a manager's clusters, as `/startupz`, `/readyz` and
/// [`Running::readiness`](crate::Running::readiness) report it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ReadinessReport {
    /// Every required context has been ready at once (it stays true after that).
    pub started: bool,
    /// Every required context is ready now.
    pub ready: bool,
    /// Each cluster: every context a registered controller declared, and every member, by name.
    pub clusters: BTreeMap<String, ClusterReport>,
    /// With leader election: whether this replica leads, and who does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leadership: Option<LeadershipReport>,
    /// In sharded mode: the live members and the shards this replica holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sharding: Option<ShardingReport>,
}

/// This replica's place in sharded mode.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ShardingReport {
    /// This replica's identity in the Leases.
    pub identity: String,
    /// The identities of the live members, this one included while its member Lease is renewed.
    pub members: Vec<String>,
    /// The shards this replica holds now (numbers, or contexts when sharded by context).
    pub shards: Vec<String>,
}

/// This replica's place in the leader election.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LeadershipReport {
    /// This replica's identity in the Lease.
    pub identity: String,
    /// `leader` (its controllers run) or `standby` (watches warm, ready to take over).
    pub role: &'static str,
    /// Who holds the Lease, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
}

/// The readiness of one cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ClusterReport {
    /// Whether the manager waits for this cluster to start (the default) or runs degraded without it.
    pub required: bool,
    /// Where the cluster stands.
    pub status: ClusterReadiness,
    /// Why it is not ready, each reason naming the cluster, e.g. `cluster cluster-b: unreachable: ...`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// Each watch the controllers opened in this cluster.
    pub watches: Vec<WatchReport>,
    /// Which cluster this is: the UID of its `kube-system` Namespace, once it has answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// For a member of the fleet: whether it is joining, ready or leaving, and what it waits for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub member: Option<MemberReport>,
}

/// Where a member of the fleet stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MemberReport {
    /// Joining, ready or leaving.
    pub phase: MemberPhase,
    /// What it waits for, e.g. `its watches to list` or, leaving, why its children cannot be deleted yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
}

/// A member's phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MemberPhase {
    /// Its join waits for its turn, or its watches have not listed yet: no child is put there yet.
    Joining,
    /// Joined, and its watches have listed: parents' children go there.
    Ready,
    /// Leaving: its children are being deleted (or orphaned) as the leave policy says.
    Leaving,
}

/// Where a cluster stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ClusterReadiness {
    /// Reachable, authorised, and every watch has synced.
    Ready,
    /// Nothing has failed, but not every watch has listed its objects yet.
    Starting,
    /// Something failed; see the reasons.
    Failing,
}

/// Where one watch stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct WatchReport {
    /// `Kind.group/version`, e.g. `Deployment.apps/v1`.
    pub kind: String,
    /// The namespace watched, or `*` for all.
    pub namespace: String,
    /// Whether the initial list has completed.
    pub synced: bool,
    /// The current failure, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}
