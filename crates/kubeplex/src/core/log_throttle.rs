//! When a failure that repeats is worth a `warn` line: when its cause changes, and while it stays the same
//! once per period, so a cluster down for an hour costs a few lines, not one per retry.

use std::time::Duration;

// tokio's clock, so paused-time tests drive the period.
use tokio::time::Instant;

/// The last cause worth a line, and when; how long the same cause waits for its next one.
#[derive(Debug)]
pub(crate) struct LogThrottle {
    last: Option<(String, Instant)>,
    again_after: Duration,
    /// The times the last cause came since its last line.
    repeats: u32,
}

/// What a cause reported to a [`LogThrottle`] is worth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A new cause (the first, or another than the last): worth a line.
    New,
    /// The same cause, its period over: worth a line, with the times it came since the last one (this
    /// time included).
    Again { repeats: u32 },
    /// The same cause within its period: for `debug` at most.
    Quiet,
}

impl LogThrottle {
    /// A cause that stays the same is worth a line again after `again_after`.
    pub(crate) const fn new(again_after: Duration) -> Self {
        Self {
            last: None,
            again_after,
            repeats: 0,
        }
    }

    /// Whether `cause` is worth a `warn` line now.
    pub(crate) fn warn(&mut self, cause: &str) -> bool {
        self.line(cause) != Line::Quiet
    }

    /// What `cause` is worth now, counted as a line when it is worth one.
    pub(crate) fn line(&mut self, cause: &str) -> Line {
        let now = Instant::now();
        let line = match &self.last {
            Some((last, _)) if last != cause => Line::New,
            None => Line::New,
            Some((_, at)) if now.saturating_duration_since(*at) >= self.again_after => {
                Line::Again {
                    repeats: self.repeats + 1,
                }
            }
            Some(_) => Line::Quiet,
        };
        match line {
            Line::Quiet => self.repeats = self.repeats.saturating_add(1),
            Line::New | Line::Again { .. } => {
                self.last = Some((cause.to_owned(), now));
                self.repeats = 0;
            }
        }
        line
    }

    /// Whether a line was given since this throttle was made or last reset.
    pub(crate) fn logged(&self) -> bool {
        self.last.is_some()
    }

    /// The failure is over: whatever comes next is new.
    pub(crate) fn reset(&mut self) {
        self.last = None;
        self.repeats = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERIOD: Duration = Duration::from_secs(60);

    #[tokio::test(start_paused = true)]
    async fn a_cause_is_worth_a_line_when_it_changes_and_then_once_per_period() {
        let mut throttle = LogThrottle::new(PERIOD);
        assert!(!throttle.logged());
        assert_eq!(throttle.line("refused"), Line::New);
        assert!(throttle.logged());
        assert!(!throttle.warn("refused"));
        assert_eq!(throttle.line("timed out"), Line::New, "another cause");
        assert!(!throttle.warn("timed out"));
        tokio::time::advance(PERIOD - Duration::from_secs(1)).await;
        assert_eq!(throttle.line("timed out"), Line::Quiet);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(throttle.line("timed out"), Line::Again { repeats: 3 });
        assert_eq!(throttle.line("timed out"), Line::Quiet, "counted as a line");
        tokio::time::advance(PERIOD).await;
        assert_eq!(throttle.line("timed out"), Line::Again { repeats: 2 });
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_reset_the_same_cause_is_new() {
        let mut throttle = LogThrottle::new(PERIOD);
        assert!(throttle.warn("refused"));
        assert!(!throttle.warn("refused"));
        throttle.reset();
        assert!(!throttle.logged());
        assert_eq!(throttle.line("refused"), Line::New);
        assert_eq!(throttle.line("refused"), Line::Quiet);
    }
}
