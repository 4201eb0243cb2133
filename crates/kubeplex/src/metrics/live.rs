//! The figures read at scrape time, not when they change: how long the runs in flight have been running,
//! how old each cache's last event is, whether each cluster is up. A stuck run or watch changes nothing,
//! so only a reading at scrape time shows it.

use std::sync::Weak;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use tokio::time::Instant;

use crate::core::Shrink;

/// A label set: names with their values.
pub(super) type Labels<const N: usize> = [(&'static str, String); N];

/// When each run in flight started, read at scrape time (a stuck run shows as a growing age even when
/// nothing else happens).
#[derive(Default)]
pub(crate) struct RunClock {
    next: AtomicU64,
    started: Mutex<std::collections::HashMap<u64, Instant>>,
}

impl RunClock {
    /// A run starts now; returns its ticket for [`finish`](Self::finish).
    pub(crate) fn start(&self) -> u64 {
        let ticket = self.next.fetch_add(1, Ordering::Relaxed);
        self.started.lock().insert(ticket, Instant::now());
        ticket
    }

    /// The run with `ticket` ended.
    pub(crate) fn finish(&self, ticket: u64) {
        self.started.lock().remove(&ticket);
    }

    /// The oldest run's age and the sum of every run's age, in seconds.
    fn ages(&self, now: Instant) -> (f64, f64) {
        self.started
            .lock()
            .values()
            .fold((0.0, 0.0), |(longest, sum), started| {
                let age = now.saturating_duration_since(*started).as_secs_f64();
                (f64::max(longest, age), sum + age)
            })
    }
}

/// When a watch last received an event, as milliseconds since the clock's creation.
pub(crate) struct EventClock {
    origin: Instant,
    last_ms: AtomicU64,
}

impl Default for EventClock {
    fn default() -> Self {
        Self {
            origin: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }
}

impl EventClock {
    pub(crate) fn tick(&self) {
        let ms = u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// Seconds since the last event (since the watch started, before any).
    fn age(&self, now: Instant) -> f64 {
        let last = self.origin + Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        now.saturating_duration_since(last).as_secs_f64()
    }
}

pub(super) type ContextsUp = Box<dyn Fn() -> Vec<(String, bool)> + Send + Sync>;

/// A queue's keys that arrived and wait, by the cluster they came from, read at scrape time
/// (counting them as they change would cost the hot path a label lookup per key).
pub(crate) trait QueueGroups: Send + Sync {
    /// `(group, waiting keys)` for every group with a waiting key.
    fn waiting_by_group(&self) -> Vec<(String, usize)>;
}

/// The figures read at scrape time. Sources are held weakly: a queue or watch that ends drops out.
#[derive(Default)]
pub(super) struct Live {
    pub(crate) runs: Mutex<Vec<(Labels<2>, Weak<RunClock>)>>,
    pub(crate) watches: Mutex<Vec<(Labels<3>, Weak<EventClock>)>>,
    pub(crate) contexts_up: Mutex<Option<ContextsUp>>,
    /// Each queue by its controller.
    pub(crate) queues: Mutex<Vec<(String, Weak<dyn QueueGroups>)>>,
    /// Each controller's children by health.
    pub(crate) children_health: Mutex<Vec<(String, Weak<dyn super::ChildrenByHealth>)>>,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Live")
    }
}

impl Live {
    pub(crate) fn lock_runs(
        &self,
    ) -> parking_lot::MutexGuard<'_, Vec<(Labels<2>, Weak<RunClock>)>> {
        self.runs.lock()
    }

    pub(crate) fn lock_watches(
        &self,
    ) -> parking_lot::MutexGuard<'_, Vec<(Labels<3>, Weak<EventClock>)>> {
        self.watches.lock()
    }
}

impl Collector for Live {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let now = Instant::now();
        let mut runs = self.lock_runs();
        runs.retain(|(_, clock)| clock.strong_count() > 0);
        runs.shrink_when_sparse();
        let ages: Vec<(&Labels<2>, (f64, f64))> = runs
            .iter()
            .filter_map(|(labels, clock)| Some((labels, clock.upgrade()?.ages(now))))
            .collect();
        gauge_family(
            &mut encoder,
            "workqueue_longest_running_processor_seconds",
            "How long the longest run in flight has been running",
            ages.iter()
                .map(|(labels, (longest, _))| ((*labels).clone(), *longest)),
        )?;
        gauge_family(
            &mut encoder,
            "workqueue_unfinished_work_seconds",
            "How long the runs in flight have been running, summed",
            ages.iter()
                .map(|(labels, (_, sum))| ((*labels).clone(), *sum)),
        )?;
        drop(ages);
        drop(runs);

        let mut watches = self.lock_watches();
        watches.retain(|(_, clock)| clock.strong_count() > 0);
        watches.shrink_when_sparse();
        let ages: Vec<(&Labels<3>, f64)> = watches
            .iter()
            .filter_map(|(labels, clock)| Some((labels, clock.upgrade()?.age(now))))
            .collect();
        gauge_family(
            &mut encoder,
            "kubeplex_cache_last_event_age_seconds",
            "Seconds since each watch's last event (grows when a watch is stuck, or its objects are quiet)",
            ages.into_iter().map(|(labels, age)| (labels.clone(), age)),
        )?;
        drop(watches);

        let mut queues = self.queues.lock();
        queues.retain(|(_, queue)| queue.strong_count() > 0);
        let depths: Vec<(Labels<2>, f64)> = queues
            .iter()
            .filter_map(|(controller, queue)| Some((controller, queue.upgrade()?)))
            .flat_map(|(controller, queue)| {
                let waiting = queue.waiting_by_group();
                waiting.into_iter().map(move |(group, keys)| {
                    let labels = [("controller", controller.clone()), ("cluster", group)];
                    #[allow(clippy::cast_precision_loss)]
                    (labels, keys as f64)
                })
            })
            .collect();
        drop(queues);
        gauge_family(
            &mut encoder,
            "kubeplex_queue_depth",
            "Keys that arrived from a watch and wait to run, by the cluster their object came from",
            depths.into_iter(),
        )?;

        let mut held = self.children_health.lock();
        held.retain(|(_, source)| source.strong_count() > 0);
        let sources: Vec<(String, std::sync::Arc<dyn super::ChildrenByHealth>)> = (held.iter())
            .filter_map(|(controller, source)| Some((controller.clone(), source.upgrade()?)))
            .collect();
        drop(held);
        // Read without the lock: a source reads its caches, which must not wait for a scrape.
        let children: Vec<(Labels<3>, f64)> = (sources.iter())
            .flat_map(|(controller, source)| {
                let counts = source.children_by_health();
                counts.into_iter().map(move |(context, health, n)| {
                    let labels = [
                        ("controller", controller.clone()),
                        ("cluster", context),
                        ("health", health.to_owned()),
                    ];
                    (labels, f64::from(n))
                })
            })
            .collect();
        gauge_family(
            &mut encoder,
            "kubeplex_children",
            "The children in each cluster's cache by their health (Healthy, Suspended, Progressing, Terminating, Unknown, Missing, Degraded)",
            children.into_iter(),
        )?;

        let up = self.contexts_up.lock();
        let contexts = up.as_ref().map(|read| read()).unwrap_or_default();
        gauge_family(
            &mut encoder,
            "kubeplex_cluster_up",
            "1 when the cluster is ready (client configured, API server answering, every watch listed), else 0",
            contexts
                .into_iter()
                .map(|(context, up)| ([("cluster", context)], if up { 1.0 } else { 0.0 })),
        )
    }
}

/// Encodes one gauge family from `(labels, value)` pairs; nothing when there are none (most scrapes find no
/// key waiting, say), since a descriptor without samples trips some OpenMetrics parsers.
fn gauge_family<L: prometheus_client::encoding::EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    values: impl Iterator<Item = (L, f64)>,
) -> Result<(), std::fmt::Error> {
    let mut values = values.peekable();
    if values.peek().is_none() {
        return Ok(());
    }
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in values {
        ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}
