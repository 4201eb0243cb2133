//! The executor: runs work for keys from a stream, knowing nothing of Kubernetes.
//!
//! kube-runtime's scheduler does the queueing (one entry per key, the earliest time wins, optional
//! debounce). Around it this adds what a controller needs: at most `concurrency` runs at once, a key never
//! run twice at once (it is held in the scheduler while it runs), requeues after each run, a bounded number
//! of spawned runs waiting for a worker thread, and a stop that lets runs in flight finish.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::{self, FuturesUnordered, StreamExt};
use futures::{Future, Stream};
use kube::runtime::scheduler::{ScheduleRequest, debounced_scheduler};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::time::Instant;

use crate::core::Action;
use crate::metrics::QueueMetrics;

/// The longest requeue delay honoured; longer ones (up to `Duration::MAX`) are cut to it, so that a deadline
/// never overflows and the timer wheel can hold it.
pub(super) const MAX_REQUEUE: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// How the executor runs.
#[derive(Clone)]
pub(crate) struct ExecutorConfig {
    /// The most runs at once; `None` is unbounded.
    pub(crate) concurrency: Option<usize>,
    /// How long a key waits for further arrivals before it runs.
    pub(crate) debounce: Duration,
    /// How many spawned runs may wait for a worker thread at once.
    pub(crate) max_waiting: usize,
    /// When a run panicked, retry the key after this long.
    pub(crate) panic_retry: Duration,
    /// Where the queue's figures go (controller-runtime's `workqueue_*`).
    pub(crate) metrics: QueueMetrics,
}

/// Runs `work` for every key from `inputs` until `stop` turns true, then waits for the runs in flight.
///
/// Each run is a task of its own (runs use every core, and a panicking run fails its key, retried after
/// `panic_retry`, not the executor).
pub(crate) async fn run<K, W, F>(
    inputs: impl Stream<Item = K> + Send,
    config: ExecutorConfig,
    mut stop: watch::Receiver<bool>,
    work: W,
) where
    K: Clone + Eq + Hash + Send + Sync + 'static,
    W: Fn(K) -> F,
    F: Future<Output = Action> + Send + 'static,
{
    let (requeue, requeued) = mpsc::unbounded_channel::<ScheduleRequest<K>>();
    let metrics = config.metrics.clone();
    let waiting = Arc::new(Mutex::new(Waiting::default()));
    let requests = stream::select(
        inputs.map({
            let (waiting, metrics) = (waiting.clone(), metrics.clone());
            move |message: K| {
                let now = Instant::now();
                metrics.adds.inc();
                let mut waiting = waiting.lock().unwrap_or_else(|e| e.into_inner());
                waiting.arrived.entry(message.clone()).or_insert(now);
                metrics.depth.set(gauge_value(waiting.arrived.len()));
                ScheduleRequest {
                    message,
                    run_at: now,
                }
            }
        }),
        stream::poll_fn({
            let mut requeued = requeued;
            move |cx| requeued.poll_recv(cx)
        }),
    );
    let scheduler = debounced_scheduler(requests, config.debounce);
    futures::pin_mut!(scheduler);

    // Runs spawned but not yet picked up by a worker thread. Without a bound, a burst of ready keys (every
    // object at startup, with unbounded concurrency) would allocate every task before any runs.
    let waiting_for_a_worker = Arc::new(Semaphore::new(config.max_waiting.max(1)));
    let mut running: HashSet<K> = HashSet::new();
    let mut in_flight = FuturesUnordered::new();
    loop {
        let has_room = config
            .concurrency
            .is_none_or(|limit| in_flight.len() < limit);
        let step = {
            // A key that cannot start now stays in the scheduler, which keeps taking (and merging) arrivals,
            // so a key that arrives N times while held costs one entry.
            let mut ready = scheduler
                .as_mut()
                .hold_unless(|key| has_room && !running.contains(key));
            tokio::select! {
                _ = stop.wait_for(|stopped| *stopped) => break,
                Some((key, next)) = in_flight.next(), if !in_flight.is_empty() => Step::Finished(key, next),
                Some(key) = ready.next() => Step::Start(key),
                else => break,
            }
        };
        match step {
            Step::Finished(key, next) => {
                running.remove(&key);
                // A burst leaves the set with room for every key it held: give it back once it drains.
                if running.capacity() > 64 && running.len() < running.capacity() / 4 {
                    running.shrink_to(running.len() * 2);
                }
                metrics.active.set(gauge_value(in_flight.len()));
                if let Some(delay) = next.requeue_after() {
                    let run_at = deadline(Instant::now(), delay);
                    metrics.adds.inc();
                    let mut waiting = waiting.lock().unwrap_or_else(|e| e.into_inner());
                    waiting.requeued.insert(key.clone(), run_at);
                    drop(waiting);
                    let _ = requeue.send(ScheduleRequest {
                        message: key,
                        run_at,
                    });
                }
            }
            // A stop that arrived with this key wins: nothing new starts once stopping.
            Step::Start(_) if *stop.borrow() => break,
            Step::Start(key) => {
                running.insert(key.clone());
                waiting
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .started(&key, &metrics);
                let pending = waiting_for_a_worker
                    .clone()
                    .acquire_owned()
                    .await
                    .expect("the semaphore is never closed");
                let run = work(key.clone());
                let task = tokio::spawn(async move {
                    drop(pending);
                    run.await
                });
                let retry = config.panic_retry;
                let (clock, work_duration) =
                    (metrics.running.clone(), metrics.work_duration.clone());
                let (ticket, began) = (clock.start(), Instant::now());
                in_flight.push(async move {
                    let next = task.await.unwrap_or_else(|panic| {
                        tracing::error!(error = %panic, "reconcile panicked; retrying later");
                        Action::requeue(retry)
                    });
                    clock.finish(ticket);
                    work_duration.observe(began.elapsed().as_secs_f64());
                    (key, next)
                });
                metrics.active.set(gauge_value(in_flight.len()));
            }
        }
    }
    if !in_flight.is_empty() {
        tracing::info!(
            in_flight = in_flight.len(),
            "stopping; finishing the runs in flight"
        );
    }
    while in_flight.next().await.is_some() {}
}

/// Keys waiting to run, for the queue's figures: since when each waits (its arrival from the inputs, or the
/// time its requeue was due). Depth counts arrivals only, as controller-runtime's queue does not count
/// requeues before they are due.
struct Waiting<K> {
    arrived: HashMap<K, Instant>,
    requeued: HashMap<K, Instant>,
}

impl<K> Default for Waiting<K> {
    fn default() -> Self {
        Self {
            arrived: HashMap::new(),
            requeued: HashMap::new(),
        }
    }
}

impl<K: Eq + Hash> Waiting<K> {
    /// `key` starts now: it waits no more, however it came.
    fn started(&mut self, key: &K, metrics: &QueueMetrics) {
        let now = Instant::now();
        let arrived = self.arrived.remove(key);
        let due = self.requeued.remove(key);
        if let Some(since) = arrived.or(due) {
            let waited = now.saturating_duration_since(since);
            metrics.queue_duration.observe(waited.as_secs_f64());
        }
        metrics.depth.set(gauge_value(self.arrived.len()));
        if self.arrived.capacity() > 64 && self.arrived.len() < self.arrived.capacity() / 4 {
            self.arrived.shrink_to(self.arrived.len() * 2);
        }
    }
}

fn gauge_value(count: usize) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

enum Step<K> {
    Finished(K, Action),
    Start(K),
}

/// `now + delay`, with the delay cut to [`MAX_REQUEUE`].
pub(super) fn deadline(now: Instant, delay: Duration) -> Instant {
    let delay = delay.min(MAX_REQUEUE);
    now.checked_add(delay).unwrap_or(now)
}

#[cfg(test)]
mod tests;
