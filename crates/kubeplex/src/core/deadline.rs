//! Deadlines on tokio's clock that never overflow: a requeue, a debounce or a ping interval of up to
//! `Duration::MAX` is cut to a year, which a timer can hold.

use std::time::Duration;

use tokio::time::Instant;

/// The longest delay honoured; longer ones (up to `Duration::MAX`) are cut to it, so that a deadline never
/// overflows and a timer can hold it.
pub(crate) const MAX_DELAY: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// `now + delay`, with the delay cut to [`MAX_DELAY`].
pub(crate) fn deadline(now: Instant, delay: Duration) -> Instant {
    let delay = delay.min(MAX_DELAY);
    now.checked_add(delay).unwrap_or(now)
}
