//! The handles the hot paths count into — one queue's, one watch's — resolved once from the families, and
//! the histograms' buckets.

use std::sync::Arc;

use super::family::Family;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use super::by_context::ContextSeries;
use super::live::{EventClock, Labels, Live, QueueGroups, RunClock};

/// A count as a gauge's value (an `i64`; a count beyond it reads as `i64::MAX`).
pub(crate) fn gauge_value(count: usize) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// controller-runtime's reconcile time buckets: 5 ms to 60 s.
const RECONCILE_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

pub(super) fn reconcile_histogram() -> Histogram {
    Histogram::new(RECONCILE_BUCKETS)
}

/// controller-runtime's workqueue buckets: 10 ns to 1 000 s, ×10.
pub(super) fn queue_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1e-8, 10.0, 12))
}

/// Pings take milliseconds to the 5 s timeout.
pub(super) fn ping_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 14))
}

/// One queue's handles, for the executor (which knows nothing of Kubernetes).
#[derive(Clone)]
pub(crate) struct QueueMetrics {
    pub(crate) depth: Gauge,
    pub(crate) adds: Counter,
    pub(crate) queue_duration: Histogram,
    pub(crate) work_duration: Histogram,
    pub(crate) active: Gauge,
    pub(crate) running: Arc<RunClock>,
    /// Where the queue's waiting keys per group are read at scrape time, with the controller's name.
    pub(super) live: Option<(String, Arc<Live>)>,
}

impl QueueMetrics {
    /// Reads `queue`'s waiting keys per group at each scrape, for as long as it exists.
    pub(crate) fn report_groups(&self, queue: std::sync::Weak<dyn QueueGroups>) {
        if let Some((controller, live)) = &self.live {
            live.queues.lock().push((controller.clone(), queue));
        }
    }
}

impl Default for QueueMetrics {
    /// Handles registered nowhere (for executors run without a manager).
    fn default() -> Self {
        Self {
            depth: Gauge::default(),
            adds: Counter::default(),
            queue_duration: queue_histogram(),
            work_duration: queue_histogram(),
            active: Gauge::default(),
            running: Arc::default(),
            live: None,
        }
    }
}

/// One watch's handles.
pub(crate) struct WatchMetrics {
    pub(crate) applied: Counter,
    pub(crate) deleted: Counter,
    pub(crate) objects: Gauge,
    /// The restarts family, and where its series are noted per cluster.
    pub(super) restarts: (Family<Labels<4>, Counter>, ContextSeries),
    pub(crate) labels: Labels<3>,
    pub(crate) clock: Arc<EventClock>,
}

impl WatchMetrics {
    /// An event arrived now.
    pub(crate) fn event(&self) {
        self.clock.tick();
    }

    /// The watch failed and retries; `reason` is a short word (`unreachable`, `forbidden`, …).
    pub(crate) fn restarted(&self, reason: &'static str) {
        let [c, k, n] = self.labels.clone();
        let context = c.1.clone();
        let labels = [c, k, n, ("reason", reason.to_owned())];
        let (family, series) = &self.restarts;
        series.track(&context, family, &labels);
        family.get_or_create(&labels).inc();
    }
}
