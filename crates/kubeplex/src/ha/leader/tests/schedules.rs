//! The election loop under generated fault schedules: three replicas against a stand-in Lease server whose
//! links go silent, slow and failing at random moments, in paused time. However the faults fall, no two
//! replicas' fences are ever open at once, and once the links are healthy again one replica leads.
//!
//! Timings as in [`running`](super::running): lease duration 15 s, renew deadline 10 s, retry 1 s.

use std::time::Duration;

use proptest::prelude::*;
use tokio::time::Instant;

use super::running::Replica;
use crate::testing::fake_leases::FakeLeases;
use crate::testing::fake_leases::faults::{Fault, Step, paused, play, schedule};

/// How often the fences are looked at between two steps.
const TICK: Duration = Duration::from_millis(100);

/// Runs `schedule` on three replicas; the first instant two fences were open, if any, and whether one
/// replica led within a minute of the links turning healthy.
async fn run(schedule: Vec<Step>) -> (Option<Duration>, bool) {
    let leases = FakeLeases::default();
    let t0 = Instant::now();
    let replicas: Vec<Replica> = ["a", "b", "c"]
        .iter()
        .map(|identity| Replica::start(&leases, identity))
        .collect();
    let mut overlap = None;
    let watch = async |until: Instant, overlap: &mut Option<Duration>| {
        while Instant::now() < until {
            tokio::time::sleep(TICK).await;
            let open = replicas.iter().filter(|r| r.fence.allows_writes()).count();
            if open > 1 && overlap.is_none() {
                *overlap = Some(t0.elapsed());
            }
        }
    };
    let links: Vec<_> = replicas.iter().map(|r| &r.link).collect();
    play(schedule, &links, async |until| {
        watch(until, &mut overlap).await
    })
    .await;
    // Healthy again: a replica leads within a minute (a lease duration, a renew deadline, rounds).
    let healed = Instant::now();
    let mut led = false;
    while !led && healed.elapsed() < Duration::from_secs(60) {
        watch(Instant::now() + TICK, &mut overlap).await;
        led = replicas
            .iter()
            .any(|r| r.leads() && r.fence.allows_writes());
    }
    for replica in replicas {
        replica.stop().await;
    }
    (overlap, led)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn no_two_fences_are_open_at_once_under_any_schedule_and_one_replica_leads_after(schedule in schedule(3)) {
        let (overlap, led) = paused(run(schedule));
        prop_assert_eq!(overlap, None, "two fences open at once");
        prop_assert!(led, "no replica led within a minute of the links turning healthy");
    }
}

/// The schedule that found a standby taking the Lease over early: its reads were slow, and it counted the
/// record as seen from when its round began, not from when the answer came; the holder's fence was open.
#[test]
fn a_slow_reader_does_not_count_the_lease_as_seen_before_it_saw_it() {
    let ms = Duration::from_millis;
    let step = Step::new;
    let schedule = vec![
        step(0, 2, Fault::Slow(ms(228))),
        step(1, 0, Fault::Slow(ms(5_001))),
        step(6_301, 0, Fault::Slow(ms(7_737))),
        step(6_501, 1, Fault::Silent(false)),
        step(3_001, 0, Fault::Silent(false)),
        step(7_401, 0, Fault::Slow(Duration::ZERO)),
        step(3_301, 1, Fault::Silent(true)),
        step(5_478, 1, Fault::Slow(ms(1_714))),
        step(3_847, 1, Fault::Failing(Some(409))),
    ];
    let (overlap, led) = paused(run(schedule));
    assert_eq!(overlap, None, "two fences open at once");
    assert!(led);
}
