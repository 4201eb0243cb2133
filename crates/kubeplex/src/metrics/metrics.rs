//! Prometheus metrics: controller-runtime's names (so its dashboards and alerts carry over) with a `cluster`
//! label, and kubeplex's own per cluster. Families are created once per manager and registered in its
//! registry; the layers above take cheap handles (a family is an `Arc`), resolved once per watch or queue
//! where they are hot. Figures that only make sense at scrape time (how long the oldest run has been
//! running, how old a cache's last event is, whether a cluster is up) are read then, by [`Live`].
//!
//! Label sets are bounded by the plan: controller × cluster × kind × namespace, never per object.

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::family::Family;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::blocked::BlockedDeletions;
use super::by_context::ContextSeries;
use super::children_health::ChildrenByHealth;
use super::handles::{QueueMetrics, WatchMetrics, gauge_value};
use super::handles::{ping_histogram, queue_histogram, reconcile_histogram};
use super::live::RunClock;
use super::live::{EventClock, Labels, Live};
use super::members::MemberChangeMetrics;
use crate::core::Verdict;

/// The parents (`namespace/name`) each (controller, cluster) holds back.
type Histograms<const N: usize> = Family<Labels<N>, Histogram>;

/// Every metric family of a manager.
#[derive(Clone)]
pub(crate) struct Metrics {
    reconciles: Family<Labels<3>, Counter>,
    reconcile_errors: Family<Labels<2>, Counter>,
    reconcile_panics: Family<Labels<2>, Counter>,
    reconcile_time: Histograms<2>,
    active_workers: Family<Labels<1>, Gauge>,
    max_concurrent: Family<Labels<1>, Gauge>,
    queue_depth: Family<Labels<2>, Gauge>,
    queue_adds: Family<Labels<2>, Counter>,
    queue_duration: Histograms<2>,
    work_duration: Histograms<2>,
    queue_retries: Family<Labels<2>, Counter>,
    pub(super) healthchecks: Family<Labels<2>, Counter>,
    pub(super) ping_seconds: Histograms<1>,
    watch_events: Family<Labels<4>, Counter>,
    watch_restarts: Family<Labels<4>, Counter>,
    cache_objects: Family<Labels<3>, Gauge>,
    children_applied: Family<Labels<4>, Counter>,
    children_pruned: Family<Labels<3>, Counter>,
    /// `kubeplex_parent_deletion_blocked`, and the parents behind it.
    pub(super) blocked: BlockedDeletions,
    pub(super) live: Arc<Live>,
    /// Every series of each cluster, for when a member leaves.
    pub(super) series: ContextSeries,
    member_changes: MemberChangeMetrics,
}

/// The values of `controller_runtime_reconcile_total`'s `result` label.
const RESULTS: [&str; 3] = ["success", "error", "requeue"];

/// How `controller_runtime_reconcile_total` labels a reconcile that ended so: `error` when the user's code
/// failed, `requeue` when it asked to run again after a delay, else `success`.
fn result_label(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Failed(_) => "error",
        Verdict::Done(action) if action.requeue_after().is_some() => "requeue",
        Verdict::Done(_) => "success",
    }
}

impl Default for Metrics {
    /// Families registered nowhere: for parts built without a manager (unit tests).
    fn default() -> Self {
        Self::register(&mut Registry::default())
    }
}

impl Metrics {
    /// Creates every family and registers it (and the scrape-time collector) in `registry`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            reconciles: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_panics: Family::default(),
            reconcile_time: Family::new_with_constructor(reconcile_histogram),
            active_workers: Family::default(),
            max_concurrent: Family::default(),
            queue_depth: Family::default(),
            queue_adds: Family::default(),
            queue_duration: Family::new_with_constructor(queue_histogram),
            work_duration: Family::new_with_constructor(queue_histogram),
            queue_retries: Family::default(),
            healthchecks: Family::default(),
            ping_seconds: Family::new_with_constructor(ping_histogram),
            watch_events: Family::default(),
            watch_restarts: Family::default(),
            cache_objects: Family::default(),
            children_applied: Family::default(),
            children_pruned: Family::default(),
            blocked: BlockedDeletions::default(),
            live: Arc::default(),
            series: ContextSeries::default(),
            member_changes: MemberChangeMetrics::default(),
        };
        let m = metrics.clone();
        let r = registry;
        r.register(
            "controller_runtime_reconcile",
            "Reconciles per controller, cluster and result (success, error, requeue)",
            m.reconciles,
        );
        r.register(
            "controller_runtime_reconcile_errors",
            "Reconciles that failed, per controller and cluster",
            m.reconcile_errors,
        );
        r.register(
            "controller_runtime_reconcile_panics",
            "Reconciles that panicked, per controller and cluster",
            m.reconcile_panics,
        );
        r.register(
            "controller_runtime_reconcile_time_seconds",
            "How long reconciles took (children and status included), per controller and cluster",
            m.reconcile_time,
        );
        r.register(
            "controller_runtime_active_workers",
            "Reconciles running now, per controller",
            m.active_workers,
        );
        r.register(
            "controller_runtime_max_concurrent_reconciles",
            "The controller's concurrency limit (0: none)",
            m.max_concurrent,
        );
        r.register(
            "workqueue_depth",
            "Keys that arrived from a watch and wait to run",
            m.queue_depth,
        );
        r.register(
            "workqueue_adds",
            "Keys added to the queue: arrivals from watches and requeues",
            m.queue_adds,
        );
        r.register(
            "workqueue_queue_duration_seconds",
            "How long a key waited from its arrival (or its requeue time) to its run",
            m.queue_duration,
        );
        r.register(
            "workqueue_work_duration_seconds",
            "How long a run took",
            m.work_duration,
        );
        r.register(
            "workqueue_retries",
            "Runs retried after a failure or a panic",
            m.queue_retries,
        );
        r.register(
            "kubeplex_cluster_healthchecks",
            "Pings of each cluster's API server, per result (success, failure)",
            m.healthchecks,
        );
        r.register(
            "kubeplex_cluster_ping_seconds",
            "How long each cluster's API server took to answer a ping",
            m.ping_seconds,
        );
        r.register(
            "kubeplex_watch_events",
            "Objects each watch received, per type (applied, deleted)",
            m.watch_events,
        );
        r.register(
            "kubeplex_watch_restarts",
            "Watch failures that made it reconnect or relist, per reason",
            m.watch_restarts,
        );
        r.register(
            "kubeplex_cache_objects",
            "Objects in each watch's cache",
            m.cache_objects,
        );
        r.register(
            "kubeplex_children_applied",
            "Children applied per controller, cluster, kind and result (success, error, conflict)",
            m.children_applied,
        );
        r.register(
            "kubeplex_children_pruned",
            "Children deleted because their parent no longer declares them, or is gone",
            m.children_pruned,
        );
        r.register(
            "kubeplex_parent_deletion_blocked",
            "Parents whose deletion waits for this unreachable cluster",
            m.blocked.gauge(),
        );
        m.member_changes.register(r);
        r.register_collector(Box::new(m.live));
        metrics
    }

    /// Records one finished reconcile of `controller` in `context`.
    pub(crate) fn reconciled(
        &self,
        controller: &str,
        context: &str,
        verdict: Verdict,
        took: Duration,
    ) {
        let labels = [
            ("controller", controller.to_owned()),
            ("cluster", context.to_owned()),
        ];
        self.series.track(context, &self.reconcile_time, &labels);
        self.reconcile_time
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        if matches!(verdict, Verdict::Failed(_)) {
            self.series.track(context, &self.reconcile_errors, &labels);
            self.reconcile_errors.get_or_create(&labels).inc();
        }
        let [controller, c] = labels;
        let labels = [controller, c, ("result", result_label(verdict).to_owned())];
        self.series.track(context, &self.reconciles, &labels);
        self.reconciles.get_or_create(&labels).inc();
    }

    /// Creates `controller`'s reconcile series in each of `contexts` at zero, so that a rate of errors reads
    /// 0 before the first one (a series appears only when first counted otherwise).
    pub(crate) fn controller_started<'a>(
        &self,
        controller: &str,
        contexts: impl IntoIterator<Item = &'a str>,
    ) {
        for context in contexts {
            let labels = [
                ("controller", controller.to_owned()),
                ("cluster", context.to_owned()),
            ];
            self.series.track(context, &self.reconcile_errors, &labels);
            drop(self.reconcile_errors.get_or_create(&labels));
            self.series.track(context, &self.reconcile_panics, &labels);
            drop(self.reconcile_panics.get_or_create(&labels));
            for result in RESULTS {
                let [controller, c] = labels.clone();
                let labels = [controller, c, ("result", result.to_owned())];
                self.series.track(context, &self.reconciles, &labels);
                drop(self.reconciles.get_or_create(&labels));
            }
        }
        let queue = [
            ("name", controller.to_owned()),
            ("controller", controller.to_owned()),
        ];
        drop(self.queue_retries.get_or_create(&queue));
    }

    /// Records a reconcile of `controller` in `context` that panicked (also counted as an error).
    pub(crate) fn panicked(&self, controller: &str, context: &str) {
        let labels = [
            ("controller", controller.to_owned()),
            ("cluster", context.to_owned()),
        ];
        self.series.track(context, &self.reconcile_panics, &labels);
        self.reconcile_panics.get_or_create(&labels).inc();
        self.series.track(context, &self.reconcile_errors, &labels);
        self.reconcile_errors.get_or_create(&labels).inc();
        let [controller, c] = labels;
        let labels = [controller, c, ("result", "error".to_owned())];
        self.series.track(context, &self.reconciles, &labels);
        self.reconciles.get_or_create(&labels).inc();
    }

    /// A run of `controller` failed (or panicked) and is retried.
    pub(crate) fn retried(&self, controller: &str) {
        let labels = [
            ("name", controller.to_owned()),
            ("controller", controller.to_owned()),
        ];
        self.queue_retries.get_or_create(&labels).inc();
    }

    /// The handles of one controller's queue; `concurrency` `None` is unbounded.
    pub(crate) fn queue(&self, controller: &str, concurrency: Option<usize>) -> QueueMetrics {
        let labels = [
            ("name", controller.to_owned()),
            ("controller", controller.to_owned()),
        ];
        let worker = [("controller", controller.to_owned())];
        let limit = concurrency.map_or(0, gauge_value);
        self.max_concurrent.get_or_create(&worker).set(limit);
        let running = Arc::new(RunClock::default());
        self.live
            .lock_runs()
            .push((labels.clone(), Arc::downgrade(&running)));
        QueueMetrics {
            depth: self.queue_depth.get_or_create_owned(&labels),
            adds: self.queue_adds.get_or_create_owned(&labels),
            queue_duration: self.queue_duration.get_or_create_owned(&labels),
            work_duration: self.work_duration.get_or_create_owned(&labels),
            active: self.active_workers.get_or_create_owned(&worker),
            running,
            live: Some((controller.to_owned(), self.live.clone())),
        }
    }

    /// The handles of one watch (`namespace` `None`: all namespaces, labelled "").
    pub(crate) fn watch(&self, context: &str, kind: &str, namespace: Option<&str>) -> WatchMetrics {
        let labels: Labels<3> = [
            ("cluster", context.to_owned()),
            ("kind", kind.to_owned()),
            ("namespace", namespace.unwrap_or("").to_owned()),
        ];
        let event = |kind: &str| {
            let [c, k, n] = labels.clone();
            let labels = [c, k, n, ("type", kind.to_owned())];
            self.series.track(context, &self.watch_events, &labels);
            self.watch_events.get_or_create_owned(&labels)
        };
        self.series.track(context, &self.cache_objects, &labels);
        let clock = Arc::new(EventClock::default());
        self.live
            .lock_watches()
            .push((labels.clone(), Arc::downgrade(&clock)));
        WatchMetrics {
            applied: event("applied"),
            deleted: event("deleted"),
            objects: self.cache_objects.get_or_create_owned(&labels),
            restarts: (self.watch_restarts.clone(), self.series.clone()),
            labels,
            clock,
        }
    }

    /// A watch was closed for good: its cache's size is no longer reported (its event counts stay, as
    /// counters do).
    pub(crate) fn watch_closed(&self, context: &str, kind: &str, namespace: Option<&str>) {
        let labels: Labels<3> = [
            ("cluster", context.to_owned()),
            ("kind", kind.to_owned()),
            ("namespace", namespace.unwrap_or("").to_owned()),
        ];
        self.cache_objects.remove(&labels);
    }

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

    /// The member runner's figures.
    pub(crate) fn member_changes(&self) -> &MemberChangeMetrics {
        &self.member_changes
    }

    /// Records a ping of `context`: whether it answered, and how long it took.
    pub(crate) fn pinged(&self, context: &str, answered: bool, took: Duration) {
        let result = if answered { "success" } else { "failure" };
        let labels = [
            ("cluster", context.to_owned()),
            ("result", result.to_owned()),
        ];
        self.series.track(context, &self.healthchecks, &labels);
        self.healthchecks.get_or_create(&labels).inc();
        if answered {
            let labels = [("cluster", context.to_owned())];
            self.series.track(context, &self.ping_seconds, &labels);
            let seconds = self.ping_seconds.get_or_create(&labels);
            seconds.observe(took.as_secs_f64());
        }
    }

    /// Records children applied by `controller` in `context`: `result` is success, error or conflict.
    pub(crate) fn children_applied(
        &self,
        controller: &str,
        context: &str,
        kind: &str,
        result: &str,
        count: u64,
    ) {
        if count > 0 {
            let labels = [
                ("controller", controller.to_owned()),
                ("cluster", context.to_owned()),
                ("kind", kind.to_owned()),
                ("result", result.to_owned()),
            ];
            self.series.track(context, &self.children_applied, &labels);
            self.children_applied.get_or_create(&labels).inc_by(count);
        }
    }

    /// Records children deleted by `controller` in `context`.
    pub(crate) fn children_pruned(&self, controller: &str, context: &str, kind: &str, count: u64) {
        if count > 0 {
            let labels = [
                ("controller", controller.to_owned()),
                ("cluster", context.to_owned()),
                ("kind", kind.to_owned()),
            ];
            self.series.track(context, &self.children_pruned, &labels);
            self.children_pruned.get_or_create(&labels).inc_by(count);
        }
    }

    /// Records whether the deletion of `parent` (`namespace/name`) by `controller` waits for `context`.
    pub(crate) fn deletion_blocked(&self, controller: &str, context: &str, parent: &str, on: bool) {
        self.blocked.set(controller, context, parent, on);
    }

    /// `parent` of `controller` is gone: it holds back no cluster any more.
    pub(crate) fn parent_gone(&self, controller: &str, parent: &str) {
        self.blocked.parent_gone(controller, parent);
    }

    /// Reads `kubeplex_cluster_up` at each scrape from `contexts` (each cluster and whether it is up).
    pub(crate) fn contexts_up(
        &self,
        contexts: impl Fn() -> Vec<(String, bool)> + Send + Sync + 'static,
    ) {
        *self.live.contexts_up.lock() = Some(Box::new(contexts));
    }
}

#[cfg(test)]
mod tests;
