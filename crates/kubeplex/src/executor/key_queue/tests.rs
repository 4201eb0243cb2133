//! The key queue with paused time: dedupe, due times, a running key held, and the figures it keeps.

use std::future::Future;

use super::*;

const SECOND: Duration = Duration::from_secs(1);

fn queue(debounce: Duration) -> (KeySender<u32>, KeyQueue<u32>, QueueMetrics) {
    let metrics = QueueMetrics::default();
    let (sender, queue) = key_queue(debounce, Fairness::default(), metrics.clone());
    (sender, queue, metrics)
}

/// What `future` gives without waiting, if anything.
fn now_or_never<T>(future: impl Future<Output = T>) -> Option<T> {
    futures::FutureExt::now_or_never(Box::pin(future))
}

#[tokio::test(start_paused = true)]
async fn a_key_sent_many_times_waits_once_in_first_sent_order() {
    let (sender, queue, metrics) = queue(Duration::ZERO);
    for round in 0..100 {
        for key in 0..100 {
            assert!(sender.send((key + round) % 100));
        }
    }
    assert_eq!(queue.waiting(), (0..100).collect::<Vec<_>>());
    assert_eq!((metrics.depth.get(), metrics.adds.get()), (100, 100));
    let mut taken = Vec::new();
    for _ in 0..100 {
        taken.push(queue.next().await);
    }
    assert_eq!(taken, (0..100).collect::<Vec<_>>());
    assert_eq!(metrics.depth.get(), 0);
    assert!(now_or_never(queue.next()).is_none(), "nothing else waits");
}

#[tokio::test(start_paused = true)]
async fn a_key_that_arrives_while_it_runs_waits_once_for_its_run_to_end() {
    let (sender, queue, metrics) = queue(Duration::ZERO);
    sender.send(1);
    assert_eq!(queue.next().await, 1);
    sender.send(1);
    sender.send(1);
    assert_eq!(metrics.depth.get(), 1, "it waits, once");
    assert!(now_or_never(queue.next()).is_none(), "not while it runs");
    queue.finished(&1, None);
    assert_eq!(now_or_never(queue.next()), Some(1));
    queue.finished(&1, None);
    assert!(
        now_or_never(queue.next()).is_none(),
        "the arrivals made one run"
    );
}

#[tokio::test(start_paused = true)]
async fn the_earliest_due_time_wins_between_an_arrival_and_a_requeue() {
    let (sender, queue, _) = queue(Duration::ZERO);
    let t0 = Instant::now();
    sender.send(1);
    queue.next().await;
    queue.finished(&1, Some(t0 + 10 * SECOND));
    tokio::time::sleep(3 * SECOND).await;
    sender.send(1);
    assert_eq!(queue.next().await, 1);
    assert_eq!(
        t0.elapsed(),
        3 * SECOND,
        "the arrival brought the requeue forward"
    );

    // An arrival during the run is due at once; the run's requeue for later does not delay it.
    sender.send(1);
    queue.finished(&1, Some(Instant::now() + 10 * SECOND));
    assert_eq!(now_or_never(queue.next()), Some(1));
    queue.finished(&1, None);

    // A requeue alone runs at its time, once.
    sender.send(2);
    queue.next().await;
    let requeued_at = Instant::now();
    queue.finished(&2, Some(requeued_at + 5 * SECOND));
    assert_eq!(queue.next().await, 2);
    assert_eq!(requeued_at.elapsed(), 5 * SECOND);
}

#[tokio::test(start_paused = true)]
async fn depth_counts_arrivals_and_adds_and_waits_count_each_wait_once() {
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = crate::metrics::Metrics::register(&mut registry).queue("q", None);
    let (sender, queue) = key_queue(Duration::ZERO, Fairness::default(), metrics.clone());
    sender.send(1);
    queue.next().await;
    queue.finished(&1, Some(Instant::now() + 10 * SECOND));
    // A requeue not yet due is an add but no depth.
    assert_eq!((metrics.depth.get(), metrics.adds.get()), (0, 2));
    sender.send(2);
    sender.send(2);
    assert_eq!((metrics.depth.get(), metrics.adds.get()), (1, 3));
    tokio::time::sleep(2 * SECOND).await;
    assert_eq!(queue.next().await, 2);
    assert_eq!(queue.next().await, 1);
    assert_eq!(metrics.depth.get(), 0);
    // Waits: key 1 none, key 2 2 s, key 1's requeue none (it was due when it started).
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for line in [
        r#"workqueue_queue_duration_seconds_sum{name="q",controller="q"} 2.0"#,
        r#"workqueue_queue_duration_seconds_count{name="q",controller="q"} 3"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_debounced_key_runs_a_full_debounce_after_its_last_arrival() {
    let (sender, queue, _) = queue(SECOND);
    let t0 = Instant::now();
    for _ in 0..5 {
        sender.send(1);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(queue.next().await, 1);
    assert_eq!(t0.elapsed(), Duration::from_millis(2200));
}

#[tokio::test]
async fn a_sender_refuses_keys_once_the_queue_is_gone() {
    let (sender, queue, _) = queue(Duration::ZERO);
    assert!(sender.is_open() && sender.clone().send(1));
    drop(queue);
    assert!(!sender.is_open());
    assert!(!sender.send(2));
}

#[tokio::test(start_paused = true)]
async fn arrivals_within_a_delay_run_once_by_its_end_however_many_arrive() {
    let (sender, queue, _) = queue(Duration::ZERO);
    let t0 = Instant::now();
    // An arrival every 300 ms for 3 s: a debounce would wait for them to stop; `within` runs at t0 + 1 s.
    for _ in 0..10 {
        sender.send_within(7, SECOND);
        tokio::time::sleep(Duration::from_millis(300)).await;
        if Instant::now() > t0 + SECOND {
            break;
        }
    }
    assert_eq!(now_or_never(queue.next()), Some(7));
    // Due already (t0 + 1 s), taken when it was due, not pushed back by the later arrivals.
    queue.finished(&7, None);
    sender.send_within(7, SECOND);
    sender.send_within(7, Duration::from_millis(100));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        now_or_never(queue.next()),
        Some(7),
        "a sooner arrival decides"
    );
}

#[tokio::test(start_paused = true)]
async fn a_requeue_never_delays_a_bounded_send_made_during_the_run() {
    let (sender, queue, _) = queue(SECOND);
    sender.send_within(1, Duration::ZERO);
    assert_eq!(queue.next().await, 1);
    // Due now by its bound; the requeue (now, plus the debounce) is later and must not push it back.
    sender.send_within(1, Duration::ZERO);
    queue.finished(&1, Some(Instant::now()));
    assert_eq!(now_or_never(queue.next()), Some(1));
}
