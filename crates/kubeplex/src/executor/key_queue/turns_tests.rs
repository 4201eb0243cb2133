//! Fair dispatch with paused time: groups take turns, each group keeps its order, every promise of the
//! queue holds. A key's group is its millions (`1_000_000` is group 1's first key).

use std::future::Future;

use super::*;

const SECOND: Duration = Duration::from_secs(1);
const B: u32 = 1_000_000;
const C: u32 = 2_000_000;

fn fair(per_group: Option<usize>) -> Fairness {
    Fairness {
        fair: true,
        per_group,
    }
}

fn queue(fairness: Fairness, debounce: Duration) -> (KeySender<u32>, KeyQueue<u32>) {
    key_queue(debounce, fairness, QueueMetrics::default())
}

fn now_or_never<T>(future: impl Future<Output = T>) -> Option<T> {
    futures::FutureExt::now_or_never(Box::pin(future))
}

/// Takes `n` keys, each run ending at once.
async fn run_n(queue: &KeyQueue<u32>, n: usize) -> Vec<u32> {
    let mut taken = Vec::new();
    for _ in 0..n {
        let key = queue.next().await;
        queue.finished(&key, None);
        taken.push(key);
    }
    taken
}

#[tokio::test(start_paused = true)]
async fn a_flood_from_one_group_delays_another_groups_key_by_at_most_one_run() {
    let (sender, queue) = queue(fair(None), Duration::ZERO);
    for key in 0..10_000 {
        sender.send(key);
    }
    assert_eq!(run_n(&queue, 5).await, [0, 1, 2, 3, 4]);
    tokio::time::sleep(SECOND).await;
    sender.send(B);
    let next_two = run_n(&queue, 2).await;
    assert!(
        next_two.contains(&B),
        "the quiet group's key waited behind {next_two:?}"
    );
    let rest = run_n(&queue, 9_994).await;
    let flood: Vec<u32> = next_two
        .into_iter()
        .chain(rest)
        .filter(|k| *k < B)
        .collect();
    assert_eq!(
        flood,
        (5..10_000).collect::<Vec<_>>(),
        "the flood kept its order"
    );
    assert!(now_or_never(queue.next()).is_none());
}

#[tokio::test(start_paused = true)]
async fn without_fairness_the_flood_comes_first() {
    let (sender, queue) = queue(Fairness::default(), Duration::ZERO);
    for key in 0..1_000 {
        sender.send(key);
    }
    tokio::time::sleep(SECOND).await;
    sender.send(B);
    let taken = run_n(&queue, 1_001).await;
    assert_eq!(taken.last(), Some(&B), "due order across groups");
}

#[tokio::test(start_paused = true)]
async fn groups_with_work_take_turns_and_each_keeps_its_order() {
    let (sender, queue) = queue(fair(None), Duration::ZERO);
    for i in 0..3 {
        sender.send(i);
    }
    for i in 0..3 {
        sender.send(B + i);
    }
    sender.send(C);
    let taken = run_n(&queue, 7).await;
    assert_eq!(taken, [0, B, C, 1, B + 1, 2, B + 2]);
}

#[tokio::test(start_paused = true)]
async fn a_key_not_yet_due_leaves_the_turn_to_a_group_whose_key_is() {
    let (sender, queue) = queue(fair(None), SECOND);
    let t0 = Instant::now();
    sender.send(0);
    tokio::time::sleep(Duration::from_millis(500)).await;
    sender.send(B);
    // Key 0 is due at 1 s, B at 1.5 s; a new arrival of 0 at 0.8 s moves it to 1.8 s.
    tokio::time::sleep(Duration::from_millis(300)).await;
    sender.send(0);
    assert_eq!(queue.next().await, B);
    assert_eq!(t0.elapsed(), Duration::from_millis(1_500));
    assert_eq!(queue.next().await, 0);
    assert_eq!(
        t0.elapsed(),
        Duration::from_millis(1_800),
        "a full debounce"
    );
}

#[tokio::test(start_paused = true)]
async fn a_requeue_runs_at_its_time_and_a_key_never_runs_twice_at_once() {
    let (sender, queue) = queue(fair(None), Duration::ZERO);
    let t0 = Instant::now();
    sender.send(0);
    assert_eq!(queue.next().await, 0);
    // It arrives again while it runs; its group's other key goes first.
    sender.send(0);
    sender.send(1);
    assert_eq!(now_or_never(queue.next()), Some(1));
    assert!(now_or_never(queue.next()).is_none(), "0 still runs");
    queue.finished(&1, Some(t0 + 5 * SECOND));
    queue.finished(&0, None);
    assert_eq!(now_or_never(queue.next()), Some(0));
    queue.finished(&0, None);
    assert_eq!(queue.next().await, 1);
    assert_eq!(t0.elapsed(), 5 * SECOND, "the requeue's time");
}

#[tokio::test(start_paused = true)]
async fn a_group_at_its_cap_waits_while_the_others_run() {
    let (sender, queue) = queue(fair(Some(1)), Duration::ZERO);
    for key in [0, 1, 2, B] {
        sender.send(key);
    }
    assert_eq!(queue.next().await, 0);
    assert_eq!(now_or_never(queue.next()), Some(B));
    assert!(
        now_or_never(queue.next()).is_none(),
        "group 0 runs one already"
    );
    queue.finished(&B, None);
    assert!(now_or_never(queue.next()).is_none());
    queue.finished(&0, None);
    assert_eq!(now_or_never(queue.next()), Some(1));
    assert!(now_or_never(queue.next()).is_none());
    queue.finished(&1, None);
    assert_eq!(now_or_never(queue.next()), Some(2));
}

#[tokio::test(start_paused = true)]
async fn every_key_waits_once_and_nothing_is_left_behind() {
    let (sender, queue) = queue(fair(Some(2)), Duration::ZERO);
    for round in 0..10 {
        for key in 0..50 {
            sender.send(key + round % 3 * B);
        }
    }
    let mut taken = run_n(&queue, 150).await;
    taken.sort_unstable();
    let mut expected: Vec<u32> = (0..3)
        .flat_map(|g| (0..50).map(move |k| k + g * B))
        .collect();
    expected.sort_unstable();
    assert_eq!(taken, expected);
    assert!(now_or_never(queue.next()).is_none());
    assert!(queue.shared.state().turns.is_empty(), "no group kept");
}

#[tokio::test(start_paused = true)]
async fn waiting_keys_are_counted_per_group_at_scrape_time() {
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = crate::metrics::Metrics::register(&mut registry).queue("q", None);
    let (sender, queue) = key_queue(Duration::ZERO, fair(None), metrics);
    for key in [0, 1, 2, B] {
        sender.send(key);
    }
    assert_eq!(queue.next().await, 0);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for line in [
        r#"kubeplex_queue_depth{controller="q",cluster="group-0"} 2"#,
        r#"kubeplex_queue_depth{controller="q",cluster="group-1"} 1"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}
