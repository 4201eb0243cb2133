//! The executor with paused time: every test runs in milliseconds of real time.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio::time::sleep;

use super::*;
use crate::core::{MAX_DELAY, deadline};
use crate::executor::key_queue::KeySender;

/// Every run as the test saw it: the key, when it started and ended (virtual time since the test began).
#[derive(Default)]
struct Log {
    runs: Mutex<Vec<(u32, Duration, Duration)>>,
    active: AtomicUsize,
    most_active: AtomicUsize,
}

impl Log {
    fn runs_of(&self, key: u32) -> Vec<(Duration, Duration)> {
        let runs = self.runs.lock();
        runs.iter()
            .filter(|(k, ..)| *k == key)
            .map(|&(_, start, end)| (start, end))
            .collect()
    }

    fn count(&self) -> usize {
        self.runs.lock().len()
    }
}

struct Harness {
    keys: KeySender<u32>,
    stop: watch::Sender<bool>,
    log: Arc<Log>,
    executor: JoinHandle<()>,
}

fn config(concurrency: Option<usize>) -> ExecutorConfig {
    ExecutorConfig {
        concurrency,
        debounce: Duration::ZERO,
        fairness: Fairness::default(),
        max_waiting: 64,
        panic_retry: Duration::from_secs(5),
        metrics: QueueMetrics::default(),
    }
}

/// An executor whose runs take `took(key)` and then ask for `next(key)`.
fn start(
    config: ExecutorConfig,
    took: impl Fn(u32) -> Duration + Send + Sync + 'static,
    next: impl Fn(u32) -> Action + Send + Sync + 'static,
) -> Harness {
    let (keys, queue) = config.queue();
    let (stop, stopped) = watch::channel(false);
    let log = Arc::new(Log::default());
    let t0 = Instant::now();
    let (took, next) = (Arc::new(took), Arc::new(next));
    let work = {
        let log = log.clone();
        move |key: u32| {
            let (log, took, next) = (log.clone(), took.clone(), next.clone());
            async move {
                let start = t0.elapsed();
                let active = log.active.fetch_add(1, Ordering::SeqCst) + 1;
                log.most_active.fetch_max(active, Ordering::SeqCst);
                sleep(took(key)).await;
                log.active.fetch_sub(1, Ordering::SeqCst);
                log.runs.lock().push((key, start, t0.elapsed()));
                next(key)
            }
        }
    };
    let executor = tokio::spawn(run(queue, config, stopped, work));
    Harness {
        keys,
        stop,
        log,
        executor,
    }
}

const SECOND: Duration = Duration::from_secs(1);

#[tokio::test(start_paused = true)]
async fn debounce_merges_arrivals_of_one_key() {
    let mut config = config(None);
    config.debounce = SECOND;
    let h = start(config, |_| Duration::ZERO, |_| Action::await_change());
    for _ in 0..5 {
        h.keys.send(1);
        sleep(Duration::from_millis(300)).await;
    }
    sleep(Duration::from_secs(3)).await;
    let runs = h.log.runs_of(1);
    assert_eq!(runs.len(), 1, "{runs:?}");
    // The last arrival was at 1.2 s: the run waits a full debounce after it.
    assert!(runs[0].0 >= Duration::from_millis(2200), "{runs:?}");
}

#[tokio::test(start_paused = true)]
async fn a_requeue_runs_the_key_again_after_its_delay() {
    let h = start(
        config(None),
        |_| Duration::ZERO,
        |_| Action::requeue(Duration::from_secs(10)),
    );
    h.keys.send(1);
    sleep(Duration::from_secs(25)).await;
    let starts: Vec<u64> = h.log.runs_of(1).iter().map(|r| r.0.as_secs()).collect();
    assert_eq!(starts, [0, 10, 20]);
}

#[tokio::test(start_paused = true)]
async fn a_huge_requeue_neither_panics_nor_runs_again() {
    let h = start(
        config(None),
        |_| Duration::ZERO,
        |_| Action::requeue(Duration::MAX),
    );
    h.keys.send(1);
    sleep(Duration::from_secs(60)).await;
    assert!(!h.executor.is_finished(), "the executor is alive");
    assert_eq!(h.log.runs_of(1).len(), 1);
    // It still serves new arrivals.
    h.keys.send(1);
    sleep(SECOND).await;
    assert_eq!(h.log.runs_of(1).len(), 2);
    assert_eq!(
        deadline(Instant::now(), Duration::MAX),
        Instant::now() + MAX_DELAY
    );
}

#[tokio::test(start_paused = true)]
async fn at_most_concurrency_runs_at_once() {
    let h = start(config(Some(2)), |_| SECOND, |_| Action::await_change());
    for key in 0..6 {
        h.keys.send(key);
    }
    sleep(Duration::from_secs(10)).await;
    assert_eq!(h.log.count(), 6);
    assert_eq!(h.log.most_active.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn a_key_never_runs_twice_at_once_and_an_arrival_during_a_run_is_kept() {
    // Unbounded concurrency: only the per-key hold keeps the runs of key 1 apart.
    let h = start(
        config(None),
        |_| Duration::from_secs(2),
        |_| Action::await_change(),
    );
    h.keys.send(1);
    sleep(Duration::from_millis(500)).await;
    h.keys.send(1);
    h.keys.send(1);
    sleep(Duration::from_secs(10)).await;
    let runs = h.log.runs_of(1);
    assert_eq!(
        runs.len(),
        2,
        "the arrivals during the first run make one more: {runs:?}"
    );
    assert!(
        runs[1].0 >= runs[0].1,
        "the second run starts after the first ended: {runs:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_slow_busy_executor_holds_each_waiting_key_once_and_runs_it_with_the_latest_state() {
    // Concurrency 1 and a slow run: 10 000 arrivals for 100 keys, each carrying a new version.
    let versions: Arc<Mutex<HashMap<u32, u32>>> = Arc::default();
    let seen: Arc<Mutex<Vec<(u32, u32)>>> = Arc::default();
    let config = config(Some(1));
    let (keys, queue) = config.queue();
    let (_stop, stopped) = watch::channel(false);
    let work = {
        let (versions, seen) = (versions.clone(), seen.clone());
        move |key: u32| {
            let (versions, seen) = (versions.clone(), seen.clone());
            async move {
                sleep(Duration::from_millis(100)).await;
                let version = versions.lock()[&key];
                seen.lock().push((key, version));
                Action::await_change()
            }
        }
    };
    tokio::spawn(run(queue, config, stopped, work));
    for version in 1..=100 {
        for key in 0..100 {
            versions.lock().insert(key, version);
            keys.send(key);
        }
        tokio::task::yield_now().await;
    }
    sleep(Duration::from_secs(60)).await;
    let seen = seen.lock();
    // Each key ran at most twice (once for a version in flight, once with the rest merged), not 100 times.
    assert!(seen.len() <= 200, "{} runs", seen.len());
    for key in 0..100 {
        let last = seen.iter().rev().find(|(k, _)| *k == key).map(|(_, v)| *v);
        assert_eq!(
            last,
            Some(100),
            "key {key} last ran with the latest version"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_burst_spawns_at_most_max_waiting_runs_ahead_of_the_workers() {
    let created = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    let most_waiting = Arc::new(AtomicUsize::new(0));
    let mut config = config(None);
    config.max_waiting = 8;
    let (keys, queue) = config.queue();
    let (_stop, stopped) = watch::channel(false);
    let work = {
        let (created, started, most_waiting) =
            (created.clone(), started.clone(), most_waiting.clone());
        move |_key: u32| {
            let waiting =
                created.fetch_add(1, Ordering::SeqCst) + 1 - started.load(Ordering::SeqCst);
            most_waiting.fetch_max(waiting, Ordering::SeqCst);
            let started = started.clone();
            async move {
                started.fetch_add(1, Ordering::SeqCst);
                Action::await_change()
            }
        }
    };
    tokio::spawn(run(queue, config, stopped, work));
    for key in 0..10_000 {
        keys.send(key);
    }
    sleep(SECOND).await;
    assert_eq!(started.load(Ordering::SeqCst), 10_000);
    assert!(most_waiting.load(Ordering::SeqCst) <= 9, "{most_waiting:?}");
}

#[tokio::test(start_paused = true)]
async fn stopping_starts_nothing_new_and_waits_for_the_runs_in_flight() {
    let h = start(
        config(Some(1)),
        |_| Duration::from_secs(5),
        |_| Action::await_change(),
    );
    for key in 0..10 {
        h.keys.send(key);
    }
    sleep(SECOND).await;
    h.stop.send(true).unwrap();
    let stopped_at = Instant::now();
    h.executor.await.unwrap();
    assert!(
        stopped_at.elapsed() >= Duration::from_secs(4),
        "it waited for the run in flight"
    );
    assert_eq!(h.log.count(), 1, "only the run in flight when it stopped");
}

#[tokio::test(start_paused = true)]
async fn a_panicking_run_is_retried_and_the_executor_lives_on() {
    let tries = Arc::new(AtomicUsize::new(0));
    let config = config(None);
    let (keys, queue) = config.queue();
    let (_stop, stopped) = watch::channel(false);
    let work = {
        let tries = tries.clone();
        move |_key: u32| {
            let tries = tries.clone();
            async move {
                if tries.fetch_add(1, Ordering::SeqCst) == 0 {
                    panic!("first try fails");
                }
                Action::await_change()
            }
        }
    };
    let executor = tokio::spawn(run(queue, config, stopped, work));
    keys.send(1);
    sleep(Duration::from_secs(4)).await;
    assert_eq!(tries.load(Ordering::SeqCst), 1);
    sleep(Duration::from_secs(2)).await;
    assert_eq!(
        tries.load(Ordering::SeqCst),
        2,
        "retried after panic_retry (5 s)"
    );
    assert!(!executor.is_finished());
}

#[tokio::test(start_paused = true)]
async fn the_queue_reports_depth_waits_adds_and_workers() {
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = crate::metrics::Metrics::register(&mut registry);
    let mut config = config(Some(1));
    config.metrics = metrics.queue("apps", Some(1));
    // One worker; each run takes 2 s; key 1 asks to run again after 10 s.
    let h = start(
        config,
        |_| 2 * SECOND,
        |key| {
            if key == 1 {
                Action::requeue(10 * SECOND)
            } else {
                Action::await_change()
            }
        },
    );
    for key in 1..=3 {
        h.keys.send(key);
    }
    sleep(SECOND).await;
    let scrape = || {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    };
    let labels = r#"{name="apps",controller="apps"}"#;
    let text = scrape();
    // Key 1 runs; 2 and 3 wait behind the single worker.
    for line in [
        format!("workqueue_depth{labels} 2"),
        format!("workqueue_adds_total{labels} 3"),
        r#"controller_runtime_active_workers{controller="apps"} 1"#.to_owned(),
        format!("workqueue_longest_running_processor_seconds{labels} 1.0"),
    ] {
        assert!(text.contains(&line), "missing {line} in\n{text}");
    }
    sleep(6 * SECOND).await;
    let text = scrape();
    // Every key ran once; key 1 waits for its requeue, which is an add but not depth.
    for line in [
        format!("workqueue_depth{labels} 0"),
        format!("workqueue_adds_total{labels} 4"),
        format!("workqueue_work_duration_seconds_count{labels} 3"),
        // Waits of 0, 2 and 4 s: the ones of 2 and 4 s are above the 1 s bucket.
        r#"workqueue_queue_duration_seconds_bucket{le="1.0",name="apps",controller="apps"} 1"#
            .to_owned(),
        format!("workqueue_queue_duration_seconds_sum{labels} 6.0"),
        r#"controller_runtime_active_workers{controller="apps"} 0"#.to_owned(),
    ] {
        assert!(text.contains(&line), "missing {line} in\n{text}");
    }
    h.stop.send(true).unwrap();
    h.executor.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn with_fair_dispatch_a_flood_in_one_group_holds_another_groups_key_for_one_run_at_most() {
    let mut config = config(Some(1));
    config.fairness = Fairness {
        fair: true,
        per_group: None,
    };
    let quiet = 1_000_000;
    let h = start(config, |_| SECOND, |_| Action::await_change());
    for key in 0..10_000 {
        h.keys.send(key);
    }
    // Runs of the flood start at 0 s, 1 s, 2 s, …; the quiet key arrives during the third.
    sleep(Duration::from_millis(2_500)).await;
    h.keys.send(quiet);
    sleep(3 * SECOND).await;
    let starts = h.log.runs_of(quiet);
    assert_eq!(
        starts.first().map(|(start, _)| *start),
        Some(4 * SECOND),
        "one run of the flood (3 s to 4 s) at most before it"
    );
    assert_eq!(
        h.log.most_active.load(Ordering::SeqCst),
        1,
        "the limit holds"
    );
    h.stop.send(true).unwrap();
    h.executor.await.unwrap();
}
