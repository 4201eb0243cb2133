//! Sharded mode's Lease loop under generated fault schedules: three replicas against a stand-in Lease
//! server whose links go silent, slow and failing at random moments, in paused time. However the faults
//! fall, no shard's fence is ever open in two replicas at once, and once the links are healthy again every
//! shard is held by exactly one replica.
//!
//! Timings as in the [tests above](super): lease duration 15 s, renew deadline 10 s, retry 1 s.

use std::time::Duration;

use proptest::prelude::*;
use tokio::time::Instant;

use super::{Replica, SHARDS};
use crate::testing::fake_leases::FakeLeases;
use crate::testing::fake_leases::faults::{Step, paused, play, schedule};

/// How often the fences are looked at between two steps.
const TICK: Duration = Duration::from_millis(100);

/// How long after the links turn healthy every shard must have one holder: members judged gone a lease
/// duration after they went quiet, shards handed over in rounds.
const SETTLE: Duration = Duration::from_secs(120);

/// What the fences showed during a run.
#[derive(Debug, Default, PartialEq)]
struct Seen {
    /// The first instant a shard's fence was open in two replicas, and that shard.
    overlap: Option<(Duration, usize)>,
    /// The shards without exactly one holder at the end, if any.
    unsettled: Vec<usize>,
}

/// Each shard's holders now.
fn holders(replicas: &[Replica]) -> Vec<usize> {
    let mut count = vec![0; usize::from(SHARDS)];
    for replica in replicas {
        for shard in replica.held() {
            count[shard] += 1;
        }
    }
    count
}

/// Runs `schedule` on three replicas.
async fn run(schedule: Vec<Step>) -> Seen {
    let leases = FakeLeases::default();
    let t0 = Instant::now();
    let replicas: Vec<Replica> = ["a", "b", "c"]
        .iter()
        .map(|identity| Replica::start(&leases, identity))
        .collect();
    let mut seen = Seen::default();
    let watch = async |until: Instant, seen: &mut Seen| {
        while Instant::now() < until {
            tokio::time::sleep(TICK).await;
            let doubled = holders(&replicas).iter().position(|n| *n > 1);
            if let (Some(shard), None) = (doubled, seen.overlap) {
                seen.overlap = Some((t0.elapsed(), shard));
            }
        }
    };
    let links: Vec<_> = replicas.iter().map(|r| &r.link).collect();
    play(schedule, &links, async |until| {
        watch(until, &mut seen).await
    })
    .await;
    let healed = Instant::now();
    loop {
        watch(Instant::now() + TICK, &mut seen).await;
        let count = holders(&replicas);
        seen.unsettled = (0..count.len()).filter(|s| count[*s] != 1).collect();
        if seen.unsettled.is_empty() || healed.elapsed() >= SETTLE {
            break;
        }
    }
    for replica in replicas {
        replica.stop().await;
    }
    seen
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn no_shard_is_held_twice_under_any_schedule_and_each_has_one_holder_after(schedule in schedule(3)) {
        let seen = paused(run(schedule));
        prop_assert_eq!(seen.overlap, None, "a shard's fence open in two replicas at once");
        prop_assert!(
            seen.unsettled.is_empty(),
            "shards {:?} without exactly one holder {:?} after the links turned healthy", seen.unsettled, SETTLE
        );
    }
}
