//! The election loop under generated fault schedules: three replicas against a stand-in Lease server whose
//! links go silent, slow and failing at random moments, in paused time. However the faults fall, no two
//! replicas' fences are ever open at once, and once the links are healthy again one replica leads.
//!
//! Timings as in [`running`](super::running): lease duration 15 s, renew deadline 10 s, retry 1 s.

use std::time::Duration;

use proptest::prelude::*;
use tokio::time::Instant;

use super::running::Replica;
use crate::client::fake_leases::FakeLeases;

/// What happens to one replica's link to the Lease server.
#[derive(Clone, Debug)]
enum Fault {
    /// Nothing arrives from it, nothing is answered (`true`), or that ends (`false`).
    Silent(bool),
    /// Each request takes this long to arrive.
    Slow(Duration),
    /// Each request is answered with this code (a server error, a conflict, a throttle), or no longer.
    Failing(Option<u16>),
}

/// A fault on one replica's link, `after` the previous step.
#[derive(Clone, Debug)]
struct Step {
    after: Duration,
    replica: usize,
    fault: Fault,
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        any::<bool>().prop_map(Fault::Silent),
        (0..12_000u64).prop_map(|ms| Fault::Slow(Duration::from_millis(ms))),
        prop::option::of(prop::sample::select(vec![409u16, 429, 500, 503]))
            .prop_map(Fault::Failing),
    ]
}

fn schedule() -> impl Strategy<Value = Vec<Step>> {
    let step = (0..8_000u64, 0..3usize, fault()).prop_map(|(ms, replica, fault)| Step {
        after: Duration::from_millis(ms),
        replica,
        fault,
    });
    prop::collection::vec(step, 1..16)
}

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
    for step in schedule {
        watch(Instant::now() + step.after, &mut overlap).await;
        let link = &replicas[step.replica].link;
        match step.fault {
            Fault::Silent(silent) => link.silent(silent),
            Fault::Slow(delay) => link.delay(delay),
            Fault::Failing(code) => link.failing(code),
        }
    }
    for replica in &replicas {
        replica.link.silent(false);
        replica.link.delay(Duration::ZERO);
        replica.link.failing(None);
    }
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

/// [`run`] on a runtime of its own in paused time (proptest's cases are plain functions).
fn run_paused(schedule: Vec<Step>) -> (Option<Duration>, bool) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(run(schedule))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn no_two_fences_are_open_at_once_under_any_schedule_and_one_replica_leads_after(schedule in schedule()) {
        let (overlap, led) = run_paused(schedule);
        prop_assert_eq!(overlap, None, "two fences open at once");
        prop_assert!(led, "no replica led within a minute of the links turning healthy");
    }
}

/// The schedule that found a standby taking the Lease over early: its reads were slow, and it counted the
/// record as seen from when its round began, not from when the answer came; the holder's fence was open.
#[test]
fn a_slow_reader_does_not_count_the_lease_as_seen_before_it_saw_it() {
    let ms = Duration::from_millis;
    let step = |after, replica, fault| Step {
        after: ms(after),
        replica,
        fault,
    };
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
    let (overlap, led) = run_paused(schedule);
    assert_eq!(overlap, None, "two fences open at once");
    assert!(led);
}
