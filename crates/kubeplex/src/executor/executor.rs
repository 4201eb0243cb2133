//! The executor: runs work for the keys of a [`KeyQueue`], knowing nothing of Kubernetes.
//!
//! The queue holds each key once and knows when it is due (see `key_queue`). Around it this adds what a
//! controller needs: at most `concurrency` runs at once, requeues after each run (a key never runs twice at
//! once: the queue counts it as running until the run ends), a bounded number of spawned runs waiting for a
//! worker thread, and a stop that lets runs in flight finish.

use std::sync::Arc;
use std::time::Duration;

use futures::Future;
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;

use super::key_queue::{Fairness, KeyQueue, KeySender, QueueKey, key_queue};
use crate::core::{Action, deadline};
use crate::metrics::{QueueMetrics, gauge_value};

/// How the executor runs.
#[derive(Clone)]
pub(crate) struct ExecutorConfig {
    /// The most runs at once; `None` is unbounded.
    pub(crate) concurrency: Option<usize>,
    /// How long a key waits for further arrivals before it runs (the queue's).
    pub(crate) debounce: Duration,
    /// How keys of different groups take turns (the queue's).
    pub(crate) fairness: Fairness,
    /// How many spawned runs may wait for a worker thread at once.
    pub(crate) max_waiting: usize,
    /// When a run panicked, retry the key after this long.
    pub(crate) panic_retry: Duration,
    /// Where the queue's figures go (controller-runtime's `workqueue_*`).
    pub(crate) metrics: QueueMetrics,
}

impl ExecutorConfig {
    /// A new, empty queue for [`run`] with this debounce and these figures, and a sender into it.
    pub(crate) fn queue<K: QueueKey>(&self) -> (KeySender<K>, KeyQueue<K>) {
        key_queue(self.debounce, self.fairness, self.metrics.clone())
    }
}

/// Runs `work` for every key `queue` hands out until `stop` turns true, then waits for the runs in flight.
///
/// Each run is a task of its own (runs use every core, and a panicking run fails its key, retried after
/// `panic_retry`, not the executor).
pub(crate) async fn run<K, W, F>(
    queue: KeyQueue<K>,
    config: ExecutorConfig,
    mut stop: watch::Receiver<bool>,
    work: W,
) where
    K: QueueKey + Send + Sync + 'static,
    W: Fn(K) -> F,
    F: Future<Output = Action> + Send + 'static,
{
    let metrics = config.metrics;
    // Runs spawned but not yet picked up by a worker thread. Without a bound, a burst of ready keys (every
    // object at startup, with unbounded concurrency) would allocate every task before any runs.
    let waiting_for_a_worker = Arc::new(Semaphore::new(config.max_waiting.max(1)));
    let mut in_flight = FuturesUnordered::new();
    loop {
        let has_room = config
            .concurrency
            .is_none_or(|limit| in_flight.len() < limit);
        // A key that cannot start now stays in the queue, which keeps taking (and merging) arrivals.
        let step = tokio::select! {
            _ = stop.wait_for(|stopped| *stopped) => break,
            Some((key, action)) = in_flight.next(), if !in_flight.is_empty() => Step::Finished(key, action),
            key = queue.next(), if has_room => Step::Start(key),
        };
        match step {
            Step::Finished(key, action) => {
                metrics.active.set(gauge_value(in_flight.len()));
                let requeue = action.requeue_after();
                queue.finished(&key, requeue.map(|delay| deadline(Instant::now(), delay)));
            }
            // A stop that arrived with this key wins: nothing new starts once stopping.
            Step::Start(_) if *stop.borrow() => break,
            Step::Start(key) => {
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
                    let action = task.await.unwrap_or_else(|panic| {
                        tracing::error!(error = %panic, "reconcile panicked; retrying later");
                        Action::requeue(retry)
                    });
                    clock.finish(ticket);
                    work_duration.observe(began.elapsed().as_secs_f64());
                    (key, action)
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

enum Step<K> {
    Finished(K, Action),
    Start(K),
}

#[cfg(test)]
mod tests;
