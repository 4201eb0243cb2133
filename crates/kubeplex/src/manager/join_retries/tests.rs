//! The retry rules in paused time: delays that grow with jitter, a newer change that drops the pending
//! join but keeps the backoff, and a success or a leave that starts it over.

use std::time::Duration;

use tokio::time::Instant;

use super::{JOIN_RETRY_MIN, JoinRetries};

fn config() -> Box<kube::Config> {
    Box::new(kube::Config::new(
        "https://member.example:6443".parse().unwrap(),
    ))
}

/// Whether `delay` lies in the jittered range of the `attempt`-th delay (0 first).
fn in_range(delay: Duration, attempt: u32) -> bool {
    let base = JOIN_RETRY_MIN * 2u32.pow(attempt);
    delay >= base && delay < base * 2
}

#[tokio::test(start_paused = true)]
async fn a_failed_join_is_due_after_a_growing_delay_and_taken_once() {
    let mut retries = JoinRetries::default();
    assert_eq!(retries.next_due(), None);
    let first = retries.failed("member-a", config(), "the plugin failed");
    assert!(in_range(first, 0), "{first:?}");
    let due = retries.next_due().expect("a join is pending");
    assert_eq!(due, Instant::now() + first);
    assert!(retries.take_due().is_empty(), "taken before it is due");
    tokio::time::sleep_until(due).await;
    let taken = retries.take_due();
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].0, "member-a");
    assert!(retries.take_due().is_empty(), "taken twice");
    assert_eq!(retries.next_due(), None);
    // It fails again: the delay doubles.
    let second = retries.failed("member-a", config(), "the plugin failed");
    assert!(in_range(second, 1), "{second:?}");
}

#[tokio::test(start_paused = true)]
async fn a_newer_change_drops_the_pending_join_but_not_the_backoff() {
    let mut retries = JoinRetries::default();
    retries.failed("member-a", config(), "the plugin failed");
    retries.failed("member-b", config(), "the plugin failed");
    retries.superseded("member-a");
    assert!(!retries.pending("member-a") && retries.pending("member-b"));
    tokio::time::sleep(Duration::from_secs(3600)).await;
    let taken: Vec<String> = retries.take_due().into_iter().map(|(m, _)| m).collect();
    assert_eq!(taken, ["member-b"], "a superseded join was tried again");
    // The newer change failed too: the delay goes on growing from where it was.
    let delay = retries.failed("member-a", config(), "the plugin failed");
    assert!(in_range(delay, 1), "{delay:?}");
    // A member never retried is not made pending by a change.
    retries.superseded("member-c");
    assert!(!retries.pending("member-c"));
}

#[tokio::test(start_paused = true)]
async fn a_success_or_a_leave_starts_the_backoff_over() {
    let mut retries = JoinRetries::default();
    for _ in 0..4 {
        retries.failed("member-a", config(), "the plugin failed");
    }
    retries.ended("member-a");
    assert!(!retries.pending("member-a"), "still pending after it ended");
    assert_eq!(retries.next_due(), None);
    let delay = retries.failed("member-a", config(), "the token server did not answer");
    assert!(in_range(delay, 0), "{delay:?}");
}

#[tokio::test(start_paused = true)]
async fn the_delay_stops_growing_at_the_cap() {
    let mut retries = JoinRetries::default();
    let delays: Vec<Duration> = (0..20)
        .map(|_| retries.failed("member-a", config(), "the plugin failed"))
        .collect();
    let cap = super::JOIN_RETRY_MAX;
    assert!(delays.iter().all(|d| *d < cap * 2), "{delays:?}");
    assert!(delays[19] >= cap, "{delays:?}");
}
