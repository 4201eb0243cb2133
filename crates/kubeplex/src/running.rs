//! A started manager: waiting for its contexts, its health, and its graceful shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::error::{Error, Result};
use crate::health::HealthReport;
use crate::leader::Election;
use crate::runtime::Runtime;

/// A started manager.
pub struct Running {
    /// Ends the pings when dropped.
    pub(crate) _pings: crate::ping::Pings,
    pub(crate) election: Election,
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) stop: watch::Sender<bool>,
    pub(crate) controllers: JoinSet<()>,
    pub(crate) background: JoinSet<()>,
    pub(crate) probe_address: Option<SocketAddr>,
}

impl Running {
    /// Resolves once every required context is ready (reachable, authorised, its kinds served and listed);
    /// fails at once, naming the context, when a required context cannot be configured at all.
    pub async fn wait_started(&self) -> Result<()> {
        let health = &self.runtime.health;
        loop {
            let changed = health.changed();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let judging = Instant::now();
            let fatal = health.fatal_errors();
            if !fatal.is_empty() {
                return Err(Error::Startup {
                    reasons: fatal.join("; "),
                });
            }
            if health.report().started {
                return Ok(());
            }
            let judged = judging.elapsed();
            changed.await;
            // Changes made meanwhile are still seen: the next `changed` is enabled before the next look.
            if let Some(pause) = pause_after(judged) {
                tokio::time::sleep(pause).await;
            }
        }
    }

    /// The health of every context now, as the probes report it.
    pub fn health(&self) -> HealthReport {
        self.runtime.health.report()
    }

    /// Where the probe server listens, if it was asked for.
    pub fn probe_address(&self) -> Option<SocketAddr> {
        self.probe_address
    }

    /// How many watches the manager opened: one per distinct (context, kind, namespace, selectors),
    /// however many controllers share it.
    pub fn watches_opened(&self) -> usize {
        self.runtime.watches.opened()
    }

    /// Stops taking new reconciles, waits for those in flight, then ends the watches and the probe server.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        while self.controllers.join_next().await.is_some() {}
        // The reconciles in flight have finished: the Lease can go to a successor now.
        self.election.end().await;
        self.runtime.watches.shutdown();
        self.background.shutdown().await;
    }
}

/// A look at every context that took less than this is repeated on every change.
const PACED_FROM: Duration = Duration::from_micros(50);
/// Above [`PACED_FROM`], the pause after a look is this many times what the look took...
const PACE: u32 = 9;
/// ...up to this: a look that took long because the thread was preempted must not delay `started` long.
const MAX_PAUSE: Duration = Duration::from_millis(10);

/// How long `wait_started` waits after a change before it looks again, given how long its last look at
/// every context took. A look builds the whole health report, O(contexts), and a context changes several
/// times while it starts (connected, each watch started and synced, pinged): a thousand contexts starting
/// together change thousands of times, and a look per change cost O(contexts²) and held the health lock
/// the watches report through. Pausing nine times as long as a look took keeps the looks under a tenth of
/// a core and delays `started` by at most that pause (10 ms at most); a look at a few contexts takes
/// microseconds, so it is not paused at all.
fn pause_after(look: Duration) -> Option<Duration> {
    (look >= PACED_FROM).then(|| (look * PACE).min(MAX_PAUSE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_at_many_contexts_are_paced_and_looks_at_few_are_not() {
        assert_eq!(pause_after(Duration::from_micros(3)), None);
        assert_eq!(pause_after(PACED_FROM - Duration::from_nanos(1)), None);
        assert_eq!(
            pause_after(Duration::from_micros(400)),
            Some(Duration::from_micros(3600))
        );
        // The looks take at most a tenth of the time they are repeated in.
        let look = Duration::from_micros(800);
        let pause = pause_after(look).unwrap();
        assert_eq!(look + pause, look * 10);
        // A look slowed down by preemption does not hold `started` back long.
        assert_eq!(pause_after(Duration::from_millis(50)), Some(MAX_PAUSE));
    }
}
