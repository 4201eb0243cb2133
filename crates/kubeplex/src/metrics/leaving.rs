//! What a member that leaves takes out of `/metrics`: every series that names it.

use super::metrics::Metrics;
use crate::core::Shrink;

impl Metrics {
    /// A member left: no series names it any more, in any family that carries `cluster`.
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

    /// Forgets the pings of a member that left (its counters of work done stay, as counters do).
    pub(crate) fn pings_ended(&self, context: &str) {
        for result in ["success", "failure"] {
            let labels = [
                ("cluster", context.to_owned()),
                ("result", result.to_owned()),
            ];
            self.healthchecks.remove(&labels);
        }
        self.ping_seconds.remove(&[("cluster", context.to_owned())]);
    }
}
