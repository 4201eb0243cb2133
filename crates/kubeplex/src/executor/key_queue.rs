//! The key queue: the one place a key waits, from the moment a source sends it until its run ends.
//!
//! Every source of a controller's keys (its watches, and what follows members and shards) sends into one
//! queue, and the executor takes from it. The queue holds each key once, waiting or running: ten thousand
//! updates to a hundred objects, sent while the controller is busy, cost a hundred entries, and the run
//! reads the latest state from the cache. It keeps when each key is due (an arrival after the debounce, a
//! requeue at its time; the earliest wins), holds a key that arrives while it runs until that run ends, and
//! is where the queue's figures come from (depth, adds, how long keys waited).

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use educe::Educe;
use parking_lot::{Mutex, MutexGuard};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::core::deadline;
use crate::metrics::{QueueGroups, QueueMetrics, gauge_value};

mod turns;

use turns::{Due, Turns};
pub(crate) use turns::{Fairness, QueueKey};

struct Shared<K: QueueKey> {
    state: Mutex<State<K>>,
    /// Wakes the executor when a key arrives.
    arrived: Notify,
    debounce: Duration,
    metrics: QueueMetrics,
}

impl<K: QueueKey> Shared<K> {
    fn state(&self) -> MutexGuard<'_, State<K>> {
        self.state.lock()
    }
}

/// The executor's end: takes each key when it is due and not running.
pub(crate) struct KeyQueue<K: QueueKey> {
    shared: Arc<Shared<K>>,
}

/// A source's end; it stops accepting keys once the queue is dropped.
#[derive(Educe)]
#[educe(Clone)]
pub(crate) struct KeySender<K: QueueKey> {
    shared: Weak<Shared<K>>,
}

/// A new, empty queue: an arrival is due `debounce` after the last arrival of its key; keys take their
/// turns as `dispatch` says; its figures go to `metrics`.
pub(crate) fn key_queue<K: QueueKey>(
    debounce: Duration,
    dispatch: Fairness,
    metrics: QueueMetrics,
) -> (KeySender<K>, KeyQueue<K>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State::new(dispatch)),
        arrived: Notify::new(),
        debounce,
        metrics,
    });
    let sender = KeySender {
        shared: Arc::downgrade(&shared),
    };
    let groups: Weak<dyn QueueGroups> = Arc::downgrade(&shared) as Weak<dyn QueueGroups>;
    shared.metrics.report_groups(groups);
    (sender, KeyQueue { shared })
}

impl<K: QueueKey> QueueGroups for Shared<K> {
    fn waiting_by_group(&self) -> Vec<(String, usize)> {
        let mut by_group: HashMap<K::Group, usize> = HashMap::new();
        for (key, entry) in &self.state().keys {
            if entry.wait.as_ref().is_some_and(|wait| wait.arrived) {
                *by_group.entry(key.group()).or_default() += 1;
            }
        }
        by_group
            .into_iter()
            .map(|(group, keys)| (K::group_name(&group), keys))
            .collect()
    }
}

impl<K: QueueKey> KeySender<K> {
    /// Queues `key`, or merges it into its entry when it waits or runs; `false` once the queue is gone.
    pub(crate) fn send(&self, key: K) -> bool {
        let Some(shared) = self.shared.upgrade() else {
            return false;
        };
        let (debounce, metrics) = (shared.debounce, &shared.metrics);
        shared
            .state()
            .arrive(key, Instant::now(), debounce, metrics, false);
        shared.arrived.notify_one();
        true
    }

    /// Queues `key` to run at most `delay` from now: an arrival that finds it waiting to run sooner leaves
    /// it where it is, so that a stream of arrivals (a child's health as a rollout goes) runs it once per
    /// `delay`, not never, as a debounce would. `false` once the queue is gone.
    pub(crate) fn send_within(&self, key: K, delay: Duration) -> bool {
        let Some(shared) = self.shared.upgrade() else {
            return false;
        };
        let metrics = &shared.metrics;
        shared
            .state()
            .arrive(key, Instant::now(), delay, metrics, true);
        shared.arrived.notify_one();
        true
    }

    /// Whether the queue still exists.
    pub(crate) fn is_open(&self) -> bool {
        self.shared.strong_count() > 0
    }
}

impl<K: QueueKey> KeyQueue<K> {
    /// The next key that is due and not running, once there is one; it counts as running from then on.
    /// Cancel-safe: a key is taken only when this returns it.
    pub(crate) async fn next(&self) -> K {
        loop {
            // A send between the look and the wait leaves a permit: the wait ends at once.
            let arrived = self.shared.arrived.notified();
            let now = Instant::now();
            let earliest = match self.shared.state().take_due(now, &self.shared.metrics) {
                Ok(key) => return key,
                Err(earliest) => earliest,
            };
            match earliest {
                Some(at) => tokio::select! {
                    () = arrived => {}
                    () = tokio::time::sleep_until(at) => {}
                },
                None => arrived.await,
            }
        }
    }

    /// The run of `key` ended; it runs again at `requeue` if given (or sooner, if it arrives meanwhile).
    pub(crate) fn finished(&self, key: &K, requeue: Option<Instant>) {
        let (debounce, metrics) = (self.shared.debounce, &self.shared.metrics);
        self.shared
            .state()
            .finished(key, requeue, debounce, metrics);
    }

    /// The keys waiting (not running), soonest due first.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> Vec<K> {
        let state = self.shared.state();
        let mut waiting: Vec<(&Due, &K)> = state.turns.iter().collect();
        waiting.sort_by_key(|(due, _)| **due);
        waiting.into_iter().map(|(_, key)| key.clone()).collect()
    }
}

/// Every key of the queue, each once, and which of them may start by when.
struct State<K: QueueKey> {
    keys: HashMap<K, Entry>,
    /// The waiting keys that are not running, by group, and whose turn it is.
    turns: Turns<K>,
    next_order: u64,
    /// How many waiting keys arrived from a source (the depth: a requeue counts only once it is due).
    arrivals: usize,
}

impl<K: QueueKey> State<K> {
    fn new(dispatch: Fairness) -> Self {
        Self {
            keys: HashMap::new(),
            turns: Turns::new(dispatch),
            next_order: 0,
            arrivals: 0,
        }
    }
}

/// One key: whether it runs, and its wait for the next run.
struct Entry {
    running: bool,
    wait: Option<Wait>,
}

struct Wait {
    /// When it is due, and its place among keys due at the same time.
    due: Due,
    /// Since when it waits, for the queue's wait times: its first arrival, else when its requeue was due.
    since: Instant,
    /// Whether it arrived from a source (not only requeued).
    arrived: bool,
}

impl<K: QueueKey> State<K> {
    fn order(&mut self) -> u64 {
        self.next_order += 1;
        self.next_order
    }

    /// `key` arrived from a source at `now`.
    /// `key` arrives, due `delay` from now; `within`: only ever sooner than it was due.
    fn arrive(
        &mut self,
        key: K,
        now: Instant,
        delay: Duration,
        metrics: &QueueMetrics,
        within: bool,
    ) {
        let debounce = delay;
        let due = (deadline(now, debounce), self.order());
        let entry = self.keys.entry(key.clone()).or_insert(Entry {
            running: false,
            wait: None,
        });
        // Whether the key takes a new place among the due keys, and the place it leaves.
        let moved = match &mut entry.wait {
            None => {
                entry.wait = Some(Wait {
                    due,
                    since: now,
                    arrived: true,
                });
                self.arrivals += 1;
                metrics.adds.inc();
                Some(None)
            }
            Some(wait) => {
                if !wait.arrived {
                    (wait.arrived, wait.since) = (true, now);
                    self.arrivals += 1;
                }
                // Not yet due: this arrival decides (with a debounce, it waits a full one again). Due already
                // (held by the concurrency limit), or due at the same time: it keeps its place.
                let decides = if within {
                    due.0 < wait.due.0
                } else {
                    wait.due.0 >= now && wait.due.0 != due.0
                };
                decides.then(|| Some(std::mem::replace(&mut wait.due, due)))
            }
        };
        // A running key's wait joins the due keys when its run ends.
        if !entry.running
            && let Some(left) = moved
        {
            if let Some(left) = left {
                self.turns.remove(left, &key);
            }
            self.turns.insert(due, key);
        }
        metrics.depth.set(gauge_value(self.arrivals));
    }

    /// The first key due at `now`, now running; else when the next one is due (`None`: none waits).
    fn take_due(&mut self, now: Instant, metrics: &QueueMetrics) -> Result<K, Option<Instant>> {
        let key = self.turns.take(now)?;
        let entry = self.keys.get_mut(&key).expect("a due key has an entry");
        entry.running = true;
        if let Some(wait) = entry.wait.take() {
            let waited = now.saturating_duration_since(wait.since);
            metrics.queue_duration.observe(waited.as_secs_f64());
            if wait.arrived {
                self.arrivals -= 1;
            }
        }
        metrics.depth.set(gauge_value(self.arrivals));
        self.shrink();
        Ok(key)
    }

    /// The run of `key` ended; it is due again at `requeue` (plus the debounce), unless it is due sooner.
    fn finished(
        &mut self,
        key: &K,
        requeue: Option<Instant>,
        debounce: Duration,
        metrics: &QueueMetrics,
    ) {
        let order = self.order();
        self.turns.ended(key);
        let Some(entry) = self.keys.get_mut(key) else {
            return;
        };
        entry.running = false;
        if let Some(at) = requeue {
            let due = (deadline(at, debounce), order);
            match &mut entry.wait {
                // Due later (a debounced arrival, say): the requeue brings it forward.
                Some(wait) if wait.due.0 > due.0 => wait.due = due,
                Some(_) => {}
                None => {
                    entry.wait = Some(Wait {
                        due,
                        since: at,
                        arrived: false,
                    });
                    metrics.adds.inc();
                }
            }
        }
        match &entry.wait {
            Some(wait) => {
                self.turns.insert(wait.due, key.clone());
            }
            None => {
                self.keys.remove(key);
            }
        }
    }

    /// A burst leaves the map with room for every key it held: give it back once it drains.
    fn shrink(&mut self) {
        if self.keys.capacity() > 64 && self.keys.len() < self.keys.capacity() / 4 {
            self.keys.shrink_to(self.keys.len() * 2);
        }
    }
}

#[cfg(test)]
mod model;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod turns_tests;
