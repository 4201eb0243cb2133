//! The member runner's figures: `kubeplex_member_changes_total{change,result}` and how many changes are at
//! work and waiting now.

use super::family::Family;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::live::Labels;

/// The member runner's families.
#[derive(Clone, Default)]
pub(crate) struct MemberChangeMetrics {
    changes: Family<Labels<2>, Counter>,
    at_work: Gauge,
    waiting: Gauge,
}

impl MemberChangeMetrics {
    /// Registers the families in `registry`.
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "kubeplex_member_changes",
            "Member changes carried out, per change (join, credentials, unhealthy, leave) and result (done, failed, cancelled, abandoned)",
            self.changes.clone(),
        );
        registry.register(
            "kubeplex_member_changes_in_flight",
            "Member joins and leaves at work now (a leave that only waits for its member to answer is not counted)",
            self.at_work.clone(),
        );
        registry.register(
            "kubeplex_member_changes_waiting",
            "Member changes waiting for their member's earlier change or for a free slot",
            self.waiting.clone(),
        );
    }
}

impl MemberChangeMetrics {
    /// Counts a member change that ended: `change` is join, credentials, unhealthy or leave; `result` done,
    /// failed, cancelled or abandoned.
    pub(crate) fn ended(&self, change: &str, result: &str) {
        let labels = [("change", change.to_owned()), ("result", result.to_owned())];
        self.changes.get_or_create(&labels).inc();
    }

    /// How many member changes are at work and waiting now.
    pub(crate) fn now(&self, at_work: usize, waiting: usize) {
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.at_work.set(count(at_work));
        self.waiting.set(count(waiting));
    }
}
