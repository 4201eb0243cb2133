//! When a cluster's API server last answered one of its clients: what its pings need not ask again. A
//! cluster whose controllers talk to its server every few seconds is not pinged on top (a ping is due one
//! interval after the last answer), so a busy fleet pays for its own work only.

use std::sync::Arc;

use hyper::StatusCode;
use parking_lot::Mutex;
use tokio::time::Instant;

/// The instant of the last answer that shows the server serving the cluster's credentials, shared by
/// every client of the cluster.
#[derive(Clone, Debug, Default)]
pub(crate) struct LastAnswer(Arc<Mutex<Option<Instant>>>);

impl LastAnswer {
    /// Notes an answer with `status`, now. Only an answer a ping would have counted as one: the server
    /// took the credentials (not 401) and served the request itself (not a 5xx, which a failing storage
    /// or an overloaded server gives while `/version` may still answer: the ping then judges).
    pub(crate) fn stamp(&self, status: StatusCode) {
        if status.is_server_error() || status == StatusCode::UNAUTHORIZED {
            return;
        }
        let now = Instant::now();
        let mut last = self.0.lock();
        if last.is_none_or(|at| at < now) {
            *last = Some(now);
        }
    }

    /// When the server last answered, if it ever has.
    pub(crate) fn at(&self) -> Option<Instant> {
        *self.0.lock()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn only_answers_that_show_the_server_taking_the_credentials_count() {
        let last = LastAnswer::default();
        assert_eq!(last.at(), None);
        last.stamp(StatusCode::OK);
        let first = last.at().expect("a 200 is an answer");
        tokio::time::advance(Duration::from_secs(1)).await;
        for refused in [
            StatusCode::UNAUTHORIZED,
            StatusCode::INTERNAL_SERVER_ERROR,
            StatusCode::SERVICE_UNAVAILABLE,
            StatusCode::GATEWAY_TIMEOUT,
        ] {
            last.stamp(refused);
            assert_eq!(last.at(), Some(first), "{refused} counted as an answer");
        }
        // Forbidden, not found, a conflict, throttling: the server read the request and the credentials.
        for answered in [
            StatusCode::FORBIDDEN,
            StatusCode::NOT_FOUND,
            StatusCode::CONFLICT,
            StatusCode::TOO_MANY_REQUESTS,
        ] {
            tokio::time::advance(Duration::from_secs(1)).await;
            let before = last.at();
            last.stamp(answered);
            assert!(last.at() > before, "{answered} not counted as an answer");
        }
        // Every client of the cluster shares the stamp.
        let other = last.clone();
        tokio::time::advance(Duration::from_secs(1)).await;
        other.stamp(StatusCode::CREATED);
        assert_eq!(last.at(), Some(Instant::now()));
    }
}
