//! The retry policy of watches: fast at first, capped low enough that a returning cluster is noticed soon.

use std::time::Duration;

use kube::runtime::utils::Backoff;

/// Exponential backoff from `initial` doubling to `max`, reset by the first success.
///
/// kube-runtime's default caps at 30 s; across clusters a returning cluster should be picked up within
/// seconds, and a few extra requests to an unreachable server cost little.
#[derive(Clone, Debug)]
pub(crate) struct WatchBackoff {
    initial: Duration,
    max: Duration,
    next: Duration,
}

impl WatchBackoff {
    pub(crate) fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            next: initial,
        }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let current = self.next;
        self.next = (current * 2).min(self.max);
        Some(current)
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = self.initial;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_resets() {
        let mut backoff = WatchBackoff::new(Duration::from_millis(500), Duration::from_secs(2));
        let delays: Vec<_> = (&mut backoff).take(4).collect();
        assert_eq!(delays, [500, 1000, 2000, 2000].map(Duration::from_millis));
        backoff.reset();
        assert_eq!(backoff.next(), Some(Duration::from_millis(500)));
    }
}
