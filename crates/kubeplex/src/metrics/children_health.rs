//! Children by health, per controller and context: read from the child caches at scrape time, not counted
//! as children change (a rollout changes health often; a scrape is rare), so a member that leaves, and
//! its caches with it, drops out.

use std::sync::Weak;

use super::metrics::Metrics;

/// A controller's children by the context they live in and their health, read at scrape time.
pub(crate) trait ChildrenByHealth: Send + Sync {
    /// `(context, health, children)` for every context with a child cache and every health.
    fn children_by_health(&self) -> Vec<(String, &'static str, u32)>;
}

impl Metrics {
    /// Reads `controller`'s children by health at each scrape, while `source` lives.
    pub(crate) fn report_children_health(
        &self,
        controller: &str,
        source: Weak<dyn ChildrenByHealth>,
    ) {
        let mut sources = self.live.children_health.lock();
        sources.retain(|(name, _)| name != controller);
        sources.push((controller.to_owned(), source));
    }
}
