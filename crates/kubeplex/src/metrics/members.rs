//! The member runner's figures: `kubeplex_member_changes_total{change,result}` and how many changes are at
//! work and waiting now; and what a member that leaves takes out of `/metrics`.

use super::family::Family;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::live::Labels;
use super::metrics::Metrics;
use crate::core::Shrink;

/// The member runner's families.
#[derive(Clone, Default)]
pub(super) struct MemberChangeMetrics {
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

impl Metrics {
    /// Counts a member change that ended: `change` is join, credentials, unhealthy or leave; `result` done,
    /// failed, cancelled or abandoned.
    pub(crate) fn member_change(&self, change: &str, result: &str) {
        let labels = [("change", change.to_owned()), ("result", result.to_owned())];
        self.member_changes.changes.get_or_create(&labels).inc();
    }

    /// How many member changes are at work and waiting now.
    pub(crate) fn member_changes_now(&self, at_work: usize, waiting: usize) {
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.member_changes.at_work.set(count(at_work));
        self.member_changes.waiting.set(count(waiting));
    }

    /// A member left: no series names it any more, in any family that carries `context`.
    pub(crate) fn context_left(&self, context: &str) {
        self.series.remove(context);
        // Its watches' clocks, even while a closed watch's task has not dropped its handles yet.
        let mut watches = self.live.lock_watches();
        watches.retain(|(labels, _)| labels[0].1 != context);
        watches.shrink_when_sparse();
        drop(watches);
        self.blocked.context_left(context);
        self.pings_ended(context);
    }
}
