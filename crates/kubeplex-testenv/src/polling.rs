//! Waiting until a condition holds: the one polling loop tests use (as controller-runtime's komega
//! `Eventually` is for Go), so that each wait states what it waits for and how long, and a failure says
//! what was last seen instead of hanging or failing with a bare timeout.

use std::fmt;
use std::time::Duration;

use crate::error::{Error, Result};

/// How often a check runs unless [`Polling::every`] says otherwise.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The least time one run of a check is given, even when the deadline is closer (the last run comes at the
/// deadline): a check that sends a request needs a moment to be answered.
pub const LEAST_TIME_FOR_A_CHECK: Duration = Duration::from_secs(5);

/// How long [`eventually`] waits for a check to pass, and how often it runs the check.
///
/// A [`Duration`] converts into one that polls every [`DEFAULT_POLL_INTERVAL`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Polling {
    within: Duration,
    every: Duration,
}

impl Polling {
    /// Waits at most `limit`, checking every [`DEFAULT_POLL_INTERVAL`].
    pub const fn within(limit: Duration) -> Self {
        Self {
            within: limit,
            every: DEFAULT_POLL_INTERVAL,
        }
    }

    /// Checks every `interval` instead (a check that is itself costly, such as a scrape, may want longer).
    #[must_use]
    pub const fn every(self, interval: Duration) -> Self {
        Self {
            every: interval,
            ..self
        }
    }
}

impl From<Duration> for Polling {
    fn from(limit: Duration) -> Self {
        Self::within(limit)
    }
}

/// What one run of a check observed: the value waited for, or what was seen instead.
///
/// Implemented for `bool` (`true` passes), `Option<T>` (`Some` passes with its value) and
/// `Result<T, E>` (`Ok` passes with its value; the error, displayed, is the observation to report).
pub trait Observation {
    /// What the wait returns once the check passes.
    type Value;

    /// The value when the check passed, else a description of what it saw.
    fn into_result(self) -> std::result::Result<Self::Value, String>;
}

impl Observation for bool {
    type Value = ();

    fn into_result(self) -> std::result::Result<(), String> {
        if self { Ok(()) } else { Err("false".into()) }
    }
}

impl<T> Observation for Option<T> {
    type Value = T;

    fn into_result(self) -> std::result::Result<T, String> {
        self.ok_or_else(|| "None".into())
    }
}

impl<T, E: fmt::Display> Observation for std::result::Result<T, E> {
    type Value = T;

    fn into_result(self) -> std::result::Result<T, String> {
        self.map_err(|error| error.to_string())
    }
}

/// Runs `check` until it passes and returns its value; panics with `what` and the last observation when it
/// has not passed by the deadline.
///
/// The check runs at once, then after each interval, and once more when the deadline has come, so it
/// always runs at least once. Each run is given the time left, and at least [`LEAST_TIME_FOR_A_CHECK`]: a
/// run that has not returned by then is dropped and the wait fails, saying so, instead of hanging. Time is
/// tokio's, so a test with paused time waits no real time.
///
/// ```no_run
/// # async fn demo(env: &kubeplex_testenv::TestEnv) {
/// use std::time::Duration;
///
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::Api;
/// use kubeplex_testenv::eventually;
///
/// let config_maps: Api<ConfigMap> = Api::default_namespaced(env.client("cluster-a").await.unwrap());
/// // `Some` passes; a failed request counts as not there yet.
/// let copied: ConfigMap = eventually("the ConfigMap copied", Duration::from_secs(30), async || {
///     config_maps.get_opt("copied").await.ok().flatten()
/// })
/// .await;
/// # let _ = copied;
/// # }
/// ```
///
/// # Panics
/// When the check has not passed by the deadline: the message names `what`, the time allowed and the last
/// observation. [`try_eventually`] returns that as an error instead.
pub async fn eventually<O: Observation>(
    what: impl fmt::Display,
    polling: impl Into<Polling>,
    check: impl AsyncFnMut() -> O,
) -> O::Value {
    match try_eventually(what, polling, check).await {
        Ok(value) => value,
        Err(error) => panic!("{error}"),
    }
}

/// [`eventually`] that does not panic: [`Error::NotEventually`] with `what` and the last observation when
/// the check has not passed by the deadline, for a caller that adds its own context (a program's log).
pub async fn try_eventually<O: Observation>(
    what: impl fmt::Display,
    polling: impl Into<Polling>,
    mut check: impl AsyncFnMut() -> O,
) -> Result<O::Value> {
    crate::deadline::arm_test_deadline();
    let Polling { within, every } = polling.into();
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let bound = left.max(LEAST_TIME_FOR_A_CHECK);
        let observed = match tokio::time::timeout(bound, check()).await {
            Ok(observation) => observation.into_result(),
            Err(_) => {
                return Err(Error::NotEventually {
                    what: what.to_string(),
                    within,
                    last: format!("a run of the check did not return within {bound:?}"),
                });
            }
        };
        match observed {
            Ok(value) => return Ok(value),
            Err(last) if tokio::time::Instant::now() >= deadline => {
                return Err(Error::NotEventually {
                    what: what.to_string(),
                    within,
                    last,
                });
            }
            Err(_) => tokio::time::sleep(every).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn returns_the_value_once_the_check_passes() {
        let started = Instant::now();
        let mut runs = 0;
        let value = eventually("the third run", Duration::from_secs(10), async || {
            runs += 1;
            (runs == 3).then_some(runs * 10)
        })
        .await;
        assert_eq!(value, 30);
        // Two intervals slept, between the three runs.
        assert_eq!(started.elapsed(), 2 * DEFAULT_POLL_INTERVAL);
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_reports_what_and_the_last_observation() {
        let started = Instant::now();
        let mut runs = 0;
        let polling = Polling::within(Duration::from_secs(1)).every(Duration::from_millis(250));
        let outcome = try_eventually("the answer", polling, async || {
            runs += 1;
            Err::<(), _>(format!("run {runs}: no answer"))
        })
        .await;
        // At 0, 250, 500 and 750 ms, and once more at the deadline.
        assert_eq!(runs, 5);
        assert_eq!(started.elapsed(), Duration::from_secs(1));
        let Err(Error::NotEventually { what, within, last }) = outcome else {
            panic!("not a timeout: {outcome:?}");
        };
        assert_eq!(
            (what.as_str(), within, last.as_str()),
            ("the answer", Duration::from_secs(1), "run 5: no answer")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_check_that_never_returns_fails_the_wait_once_its_time_is_up() {
        let started = Instant::now();
        let mut runs = 0;
        let outcome = try_eventually("a hung check", Duration::from_secs(30), async || {
            runs += 1;
            if runs == 2 {
                std::future::pending::<()>().await;
            }
            false
        })
        .await;
        // The second run, 100 ms in, is given what is left of the 30 s.
        assert_eq!(started.elapsed(), Duration::from_secs(30));
        let Err(Error::NotEventually { what, last, .. }) = outcome else {
            panic!("not a timeout: {outcome:?}");
        };
        assert_eq!(what, "a hung check");
        assert!(last.contains("did not return within"), "{last}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_run_at_the_deadline_still_has_time_to_answer() {
        let started = Instant::now();
        let mut runs = 0;
        let polling = Polling::within(Duration::from_secs(1)).every(Duration::from_secs(1));
        let value = try_eventually("a slow check", polling, async || {
            runs += 1;
            if runs == 2 {
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            (runs == 2).then_some(runs)
        })
        .await
        .unwrap();
        // The second run came at the deadline, no time left, and still had its 5 s: it answered in 2.
        assert_eq!(value, 2);
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn eventually_panics_with_the_message() {
        let waited = tokio::spawn(eventually(
            "a flag that stays down",
            Duration::from_secs(5),
            async || false,
        ));
        let panic = waited.await.unwrap_err().into_panic();
        let message = panic.downcast_ref::<String>().unwrap();
        assert_eq!(
            message,
            "a flag that stays down: not within 5s; last observed: false"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_check_runs_at_least_once() {
        let passed = try_eventually("at once", Duration::ZERO, async || Some(1)).await;
        assert_eq!(passed.unwrap(), 1);
        let failed = try_eventually("never", Duration::ZERO, async || None::<()>).await;
        assert!(
            matches!(failed, Err(Error::NotEventually { .. })),
            "{failed:?}"
        );
    }
}
