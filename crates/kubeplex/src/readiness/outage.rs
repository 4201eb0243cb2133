//! One line per cluster and cause: when a cluster starts failing (its pings or its watches), when the
//! cause changes, once a minute while it lasts, and when it answers again — not a line per watch.

use std::time::Duration;

use crate::core::{Line, LogThrottle};

/// How often an outage that lasts is logged again.
const AGAIN_AFTER: Duration = Duration::from_secs(60);

/// What a cluster's outage is now: its causes (each once, in the order seen) and how many of its watches
/// it holds up.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Outage {
    pub(super) causes: String,
    pub(super) watches: usize,
}

/// What was logged of one cluster's outages.
pub(super) struct OutageLog(LogThrottle);

impl Default for OutageLog {
    fn default() -> Self {
        Self(LogThrottle::new(AGAIN_AFTER))
    }
}

/// A line to log about a cluster, once its lock is released.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum OutageLine {
    /// It fails for a new cause.
    Began(Outage),
    /// It still fails for the same cause; `repeats` times since the last line.
    Lasts(Outage, u32),
    /// It answers again.
    Over,
}

impl OutageLog {
    /// What `now` (`None`: the cluster fails for no cause) is worth logging.
    pub(super) fn follow(&mut self, now: Option<Outage>) -> Option<OutageLine> {
        let Some(outage) = now else {
            let was = self.0.logged();
            self.0.reset();
            return was.then_some(OutageLine::Over);
        };
        match self.0.line(&outage.causes) {
            Line::New => Some(OutageLine::Began(outage)),
            Line::Again { repeats } => Some(OutageLine::Lasts(outage, repeats)),
            Line::Quiet => None,
        }
    }
}

impl OutageLine {
    /// Logs the line about cluster `name`.
    pub(super) fn log(self, name: &str) {
        match self {
            OutageLine::Began(Outage { causes, watches }) => {
                tracing::warn!(cluster = %name, %causes, watches, "cluster failing; its watches and pings retry with backoff");
            }
            OutageLine::Lasts(Outage { causes, watches }, repeats) => {
                tracing::warn!(cluster = %name, %causes, watches, repeats, "cluster still failing");
            }
            OutageLine::Over => tracing::info!(cluster = %name, "cluster answers again"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outage(causes: &str) -> Option<Outage> {
        Some(Outage {
            causes: causes.into(),
            watches: 3,
        })
    }

    #[tokio::test(start_paused = true)]
    async fn an_outage_is_one_line_per_cause_then_one_a_minute_and_one_when_it_ends() {
        let mut log = OutageLog::default();
        assert_eq!(log.follow(None), None, "no outage, nothing to say");
        let began = log.follow(outage("unreachable: connection refused"));
        assert!(matches!(began, Some(OutageLine::Began(_))), "{began:?}");
        for _ in 0..10 {
            assert_eq!(log.follow(outage("unreachable: connection refused")), None);
        }
        let other = log.follow(outage("credentials were rejected (401 Unauthorized)"));
        assert!(matches!(other, Some(OutageLine::Began(_))), "{other:?}");
        tokio::time::advance(AGAIN_AFTER).await;
        let lasts = log.follow(outage("credentials were rejected (401 Unauthorized)"));
        assert!(matches!(lasts, Some(OutageLine::Lasts(_, 1))), "{lasts:?}");
        assert_eq!(log.follow(None), Some(OutageLine::Over));
        assert_eq!(log.follow(None), None);
    }
}
