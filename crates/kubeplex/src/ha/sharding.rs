//! Sharded mode, as configured: N replicas split the parents between them, each shard owned by the replica
//! that rendezvous hashing over the live members' Leases names, and fenced by a Lease of its own.

use std::time::Duration;

use super::leader::LeaderElection;
use super::rendezvous::ShardBy;
use crate::core::Context;

/// The label every Lease of a shard group carries, valued with the group's name.
pub(super) const GROUP_LABEL: &str = "kubeplex.io/shard-group";
/// The label telling a member's Lease (`member`) from a shard's (`shard`).
pub(super) const KIND_LABEL: &str = "kubeplex.io/shard-lease";

/// Sharded mode: where the Leases are, how work is split, who this replica is, and the timings (those of
/// [`LeaderElection`], with the same rules and defaults).
///
/// ```
/// # kubeplex::contexts! { enum Fleet { Control = "control" } }
/// let sharding = kubeplex::ha::Sharding::by_parent(Fleet::Control, "operators", "app-deployer", 12);
/// let manager = kubeplex::Manager::new().sharding(sharding);
/// # let _ = manager;
/// ```
#[derive(Clone, Debug)]
pub struct Sharding {
    pub(crate) lease: LeaderElection,
    pub(crate) by: ShardBy,
}

impl Sharding {
    /// Parents split by a hash of their namespace/name into `shards` shards (a few per replica you expect:
    /// fewer shards than replicas leaves replicas idle). The Leases are `<name>-member-<identity>` and
    /// `<name>-shard-<i>` in `namespace` of `context`.
    pub fn by_parent(
        context: impl Context,
        namespace: impl Into<String>,
        name: impl Into<String>,
        shards: u16,
    ) -> Self {
        Self {
            lease: LeaderElection::new(context, namespace, name),
            by: ShardBy::Parent(shards),
        }
    }

    /// Parents split by the context they live in: one shard per primary context of the manager's
    /// controllers, fenced by the Lease `<name>-shard-<context>`. A replica watches a context's primaries
    /// only while it holds the context's shard, so their memory is split between the replicas.
    pub fn by_context(
        context: impl Context,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        Self {
            lease: LeaderElection::new(context, namespace, name),
            by: ShardBy::Context,
        }
    }

    /// This replica's name in the Leases (and in its requests' `User-Agent`).
    pub fn with_identity(mut self, identity: impl Into<String>) -> Self {
        self.lease = self.lease.with_identity(identity);
        self
    }

    /// How long a Lease holds without renewal.
    pub fn lease_duration(mut self, duration: Duration) -> Self {
        self.lease = self.lease.lease_duration(duration);
        self
    }

    /// How long a shard's owner writes after its last renewal was sent; shorter than the lease duration.
    pub fn renew_deadline(mut self, deadline: Duration) -> Self {
        self.lease = self.lease.renew_deadline(deadline);
        self
    }

    /// How often the Leases are renewed and the shards reassigned; shorter than the renew deadline.
    pub fn retry_period(mut self, period: Duration) -> Self {
        self.lease = self.lease.retry_period(period);
        self
    }

    /// This replica's identity, as [`with_identity`](Self::with_identity) set it or the default.
    pub fn identity(&self) -> &str {
        self.lease.identity()
    }

    /// `namespace/name` of the group, for errors.
    pub(crate) fn group(&self) -> String {
        self.lease.lease()
    }

    /// Why this configuration cannot work, if it cannot.
    pub(crate) fn problem(&self) -> Option<String> {
        if let Some(problem) = self.lease.problem() {
            return Some(problem);
        }
        let name = &self.lease.name;
        // A DNS-1123 label, short enough that the Leases named after it are too.
        if name.len() > 40 || kubeplex_names::dns_label(name).is_err() {
            return Some(format!(
                "the group name {name:?} must be 1-40 lowercase letters, digits or '-', starting and ending \
                 with a letter or digit (it names Leases and labels them)"
            ));
        }
        if self.by == ShardBy::Parent(0) {
            return Some("the number of shards must be at least 1".into());
        }
        None
    }

    /// The name of `identity`'s member Lease.
    pub(crate) fn member_lease(&self, identity: &str) -> String {
        format!("{}-member-{}", self.lease.name, lease_safe(identity))
    }

    /// The shards' names, and the names of their Leases; `primary_contexts` are the manager's controllers'.
    pub(crate) fn shards(&self, primary_contexts: &[String]) -> Vec<(String, String)> {
        let names: Vec<String> = match self.by {
            ShardBy::Parent(count) => (0..count).map(|i| i.to_string()).collect(),
            ShardBy::Context => primary_contexts.to_vec(),
        };
        names
            .into_iter()
            .map(|shard| {
                let lease = format!("{}-shard-{}", self.lease.name, lease_safe(&shard));
                (shard, lease)
            })
            .collect()
    }
}

/// `text` as a piece of a Lease name: lowercase letters, digits and '-', at most 150 characters; when that
/// changed it, a hash of the original follows, so two contexts never share a Lease.
fn lease_safe(text: &str) -> String {
    let mut safe: String = text
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-') => c,
            _ => '-',
        })
        .take(150)
        .collect();
    if safe != text {
        let hash = text.bytes().fold(0x811c_9dc5_u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        });
        safe = format!("{}-{hash:08x}", safe.trim_matches('-'));
    }
    safe
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::contexts! { enum Fleet { Control = "control" } }

    #[test]
    fn lease_names_are_valid_and_distinct() {
        let sharding = Sharding::by_context(Fleet::Control, "ops", "fleet").with_identity("Pod_1");
        assert_eq!(sharding.member_lease("pod-1"), "fleet-member-pod-1");
        let member = sharding.member_lease("Pod_1");
        assert!(member.starts_with("fleet-member-pod-1-"), "{member}");
        let shards =
            sharding.shards(&["kind-a".into(), "user@kind-a".into(), "user.kind-a".into()]);
        assert_eq!(shards[0], ("kind-a".into(), "fleet-shard-kind-a".into()));
        assert_ne!(
            shards[1].1, shards[2].1,
            "contexts that sanitise alike keep their own Lease"
        );
        let by_parent = Sharding::by_parent(Fleet::Control, "ops", "fleet", 3).shards(&[]);
        let leases: Vec<&str> = by_parent.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(leases, ["fleet-shard-0", "fleet-shard-1", "fleet-shard-2"]);
    }

    #[test]
    fn a_configuration_that_cannot_work_is_named() {
        let bad = Sharding::by_parent(Fleet::Control, "ops", "Fleet!", 3);
        assert!(bad.problem().unwrap().contains("group name \"Fleet!\""));
        let none = Sharding::by_parent(Fleet::Control, "ops", "fleet", 0);
        assert!(none.problem().unwrap().contains("at least 1"));
        let timing = Sharding::by_context(Fleet::Control, "ops", "fleet")
            .renew_deadline(Duration::from_secs(20));
        assert!(timing.problem().unwrap().contains("renew deadline"));
        assert_eq!(
            Sharding::by_context(Fleet::Control, "ops", "fleet").problem(),
            None
        );
    }
}
