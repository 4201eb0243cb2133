//! How many tokens not seen before the secure metrics server may have reviewed: a token bucket, so that a
//! client sending token after token costs the API server a bounded number of TokenReviews, while the
//! scrapers (a few tokens, each reviewed once per verdict's TTL) never meet the limit.

use std::time::Duration;

use tokio::time::Instant;

/// The reviews of new tokens allowed at once, after a quiet while.
pub(super) const BURST: u32 = 20;
/// How often one more review of a new token is allowed (5 a second).
pub(super) const REFILL_EVERY: Duration = Duration::from_millis(200);

/// A token bucket of reviews: [`BURST`] at most, one more every [`REFILL_EVERY`].
pub(super) struct ReviewBudget {
    /// Reviews that may start now.
    left: u32,
    /// When the last refill was counted.
    counted: Instant,
}

impl ReviewBudget {
    pub(super) fn new() -> Self {
        Self {
            left: BURST,
            counted: Instant::now(),
        }
    }

    /// Takes one review from the budget; `false` when none is left.
    pub(super) fn take(&mut self) -> bool {
        let now = Instant::now();
        let refills =
            now.saturating_duration_since(self.counted).as_nanos() / REFILL_EVERY.as_nanos();
        if refills > 0 {
            let refills = u32::try_from(refills).unwrap_or(u32::MAX);
            self.left = self.left.saturating_add(refills).min(BURST);
            // Whole refills only: the rest of a period counts towards the next.
            self.counted = match self.left {
                BURST => now,
                _ => self.counted + REFILL_EVERY * refills,
            };
        }
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_then_one_review_per_refill_period() {
        let mut budget = ReviewBudget::new();
        for n in 0..BURST {
            assert!(budget.take(), "review {n} of the burst");
        }
        assert!(!budget.take(), "past the burst");
        tokio::time::advance(REFILL_EVERY - Duration::from_millis(1)).await;
        assert!(!budget.take(), "before a refill");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(budget.take(), "one refilled");
        assert!(!budget.take(), "only one");
        // Half a period, twice: the halves add up to one refill.
        tokio::time::advance(REFILL_EVERY / 2).await;
        assert!(!budget.take());
        tokio::time::advance(REFILL_EVERY / 2).await;
        assert!(budget.take());
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_quiet_while_refills_the_burst_and_no_more() {
        let mut budget = ReviewBudget::new();
        while budget.take() {}
        tokio::time::advance(Duration::from_secs(3600)).await;
        let taken = std::iter::from_fn(|| budget.take().then_some(())).count();
        assert_eq!(taken, BURST as usize);
    }
}
