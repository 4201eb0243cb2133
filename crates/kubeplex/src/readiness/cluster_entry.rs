//! One cluster's readiness as the state keeps it: what its client, pings, watches and identity say, and the
//! report and outage they add up to.

use std::sync::Arc;

use parking_lot::Mutex;

use super::outage::{Outage, OutageLog};
use super::report::{ClusterReadiness, ClusterReport, WatchReport, capped};
use super::watch_readiness::WatchState;

#[derive(Default)]
pub(super) struct ClusterEntry {
    pub(super) required: bool,
    /// One of the code's contexts (not a member of the fleet): its name may be shown to anyone.
    pub(super) fixed: bool,
    /// Whether it was ready when last looked at (after each change).
    pub(super) ready: bool,
    /// Whether it has been ready once with its watches listed: its first readiness (a start, a join) and
    /// what comes before it are no flip.
    pub(super) was_ready: bool,
    /// The pool could not configure a client: no watch or ping will run.
    pub(super) config_error: Option<String>,
    /// The pool has not connected yet.
    pub(super) connecting: bool,
    /// The last ping failed.
    pub(super) unreachable: Option<String>,
    /// Why nothing is written to it: it reaches the same cluster as another name, or another cluster than
    /// it did.
    pub(super) refused: Option<String>,
    /// Which cluster it is (the `kube-system` Namespace's UID), once known.
    pub(super) identity: Option<String>,
    /// It is being asked which cluster it is: not ready until it has answered.
    pub(super) identifying: bool,
    pub(super) watches: Vec<Arc<Mutex<WatchState>>>,
    /// What was logged of its outages.
    pub(super) outages: OutageLog,
}

impl ClusterEntry {
    /// What [`report`](Self::report) would say is `Ready`, without building it.
    pub(super) fn is_ready(&self) -> bool {
        self.config_error.is_none()
            && self.unreachable.is_none()
            && self.refused.is_none()
            && !self.identifying
            && !self.connecting
            && self.watches.iter().all(|w| w.lock().is_ready())
    }

    /// Why the cluster fails now, its pings' and its watches' causes each once, and how many watches
    /// wait for it; `None` when nothing fails (or it cannot be configured: that is said at start).
    pub(super) fn outage(&self) -> Option<Outage> {
        if self.config_error.is_some() {
            return None;
        }
        let mut causes: Vec<String> = self.unreachable.iter().cloned().collect();
        let mut failing = 0;
        for watch in &self.watches {
            let watch = watch.lock();
            if let Some(problem) = watch.problem() {
                failing += 1;
                if !causes.iter().any(|c| c == problem) {
                    causes.push(problem.to_owned());
                }
            }
        }
        if causes.is_empty() {
            return None;
        }
        let watches = match self.unreachable {
            Some(_) => self.watches.len(),
            None => failing,
        };
        let causes = causes.join("; ");
        Some(Outage { causes, watches })
    }

    pub(super) fn report(&self, name: &str) -> ClusterReport {
        let watches: Vec<WatchReport> = self.watches.iter().map(|w| w.lock().report()).collect();
        let mut reasons: Vec<String> = Vec::new();
        if let Some(error) = &self.config_error {
            reasons.push(error.clone());
        }
        if let Some(problem) = &self.unreachable {
            reasons.push(format!("cluster {name}: {problem}"));
        }
        if let Some(refused) = &self.refused {
            reasons.push(format!("cluster {name}: {refused}"));
        }
        for watch in &watches {
            if let Some(problem) = &watch.problem
                && !reasons.iter().any(|r| r.ends_with(problem.as_str()))
            {
                reasons.push(format!("cluster {name}: {problem}"));
            }
        }
        let reasons: Vec<String> = reasons.into_iter().map(capped).collect();
        let watches: Vec<WatchReport> = (watches.into_iter())
            .map(|mut w| {
                w.problem = w.problem.map(capped);
                w
            })
            .collect();
        let status = if !reasons.is_empty() {
            ClusterReadiness::Failing
        } else if self.connecting || self.identifying || watches.iter().any(|w| !w.synced) {
            ClusterReadiness::Starting
        } else {
            ClusterReadiness::Ready
        };
        ClusterReport {
            required: self.required,
            status,
            reasons,
            watches,
            member: None,
            identity: self.identity.clone(),
        }
    }
}
