//! Generated fault schedules for the links to [`FakeLeases`](super::FakeLeases): steps that silence, slow
//! down or fail one replica's link at random moments, for the coordination loops' property tests, and the
//! paused runtime they run on.

use std::time::Duration;

use proptest::prelude::*;
use tokio::time::Instant;

use super::Link;

/// What happens to one replica's link to the Lease server.
#[derive(Clone, Debug)]
pub(crate) enum Fault {
    /// Nothing arrives from it, nothing is answered (`true`), or that ends (`false`).
    Silent(bool),
    /// Each request takes this long to arrive.
    Slow(Duration),
    /// Each request is answered with this code (a server error, a conflict, a throttle), or no longer.
    Failing(Option<u16>),
}

/// A fault on one replica's link, `after` the previous step.
#[derive(Clone, Debug)]
pub(crate) struct Step {
    pub(crate) after: Duration,
    pub(crate) replica: usize,
    pub(crate) fault: Fault,
}

impl Step {
    /// A step as a regression test writes one: milliseconds after the previous, on `replica`.
    pub(crate) fn new(after_ms: u64, replica: usize, fault: Fault) -> Self {
        let after = Duration::from_millis(after_ms);
        Self {
            after,
            replica,
            fault,
        }
    }
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        any::<bool>().prop_map(Fault::Silent),
        (0..12_000u64).prop_map(|ms| Fault::Slow(Duration::from_millis(ms))),
        prop::option::of(prop::sample::select(vec![409u16, 429, 500, 503]))
            .prop_map(Fault::Failing),
    ]
}

/// Up to 15 steps on the links of `replicas` replicas, each up to 8 s after the one before.
pub(crate) fn schedule(replicas: usize) -> impl Strategy<Value = Vec<Step>> {
    let step = (0..8_000u64, 0..replicas, fault()).prop_map(|(ms, replica, fault)| {
        let after = Duration::from_millis(ms);
        Step {
            after,
            replica,
            fault,
        }
    });
    prop::collection::vec(step, 1..16)
}

impl Link {
    /// Suffers `fault` from now on.
    pub(crate) fn suffer(&self, fault: &Fault) {
        match fault {
            Fault::Silent(silent) => self.silent(*silent),
            Fault::Slow(delay) => self.delay(*delay),
            Fault::Failing(code) => self.failing(*code),
        }
    }

    /// Healthy again: answering, at once, with what the Leases say.
    pub(crate) fn heal(&self) {
        self.silent(false);
        self.delay(Duration::ZERO);
        self.failing(None);
    }
}

/// Plays `schedule` on `links` (one per replica): waits each step out in `wait` (given the instant to
/// wait until), then brings its fault; heals every link once the schedule is over.
pub(crate) async fn play(schedule: Vec<Step>, links: &[&Link], mut wait: impl AsyncFnMut(Instant)) {
    for step in schedule {
        wait(Instant::now() + step.after).await;
        links[step.replica].suffer(&step.fault);
    }
    for link in links {
        link.heal();
    }
}

/// Runs `test` to its end on a runtime of its own in paused time (proptest's cases are plain functions).
pub(crate) fn paused<T>(test: impl Future<Output = T>) -> T {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(test)
}
