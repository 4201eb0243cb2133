//! What became of a request: the handler's answer, or why there is none, and how a request is answered
//! when there is none.

use std::time::Duration;

use futures::future::BoxFuture;

/// A handler's answer, or why it gave none.
#[derive(Debug)]
pub(super) enum Outcome {
    /// Admitted, with the mutation's patch if it changed anything.
    Allowed(Option<json_patch::Patch>),
    /// Refused by the handler, with its message.
    Denied(String),
    /// The request's object does not fit the handler's type: why.
    Invalid(String),
    /// The handler panicked.
    Panicked,
    /// The handler did not answer within its bound.
    TimedOut,
}

impl Outcome {
    /// The `reason` label of `kubeplex_webhook_failures_total` when the handler gave no answer.
    pub(super) fn failure(&self) -> Option<&'static str> {
        match self {
            Self::Invalid(_) => Some("invalid"),
            Self::Panicked => Some("panic"),
            Self::TimedOut => Some("timeout"),
            Self::Allowed(_) | Self::Denied(_) => None,
        }
    }
}

/// How a request is answered when its handler cannot answer: it panicked, overran its timeout, or the
/// object does not fit the handler's type. Like the webhook configuration's `failurePolicy`, for what the
/// API server does when the webhook does not answer at all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Refused, saying why (the default): nothing the handler would have refused gets in.
    #[default]
    Fail,
    /// Admitted: availability over the check. Mutations are not applied.
    Ignore,
}

/// Runs `work` on a task of its own within the bound: its output, or [`Outcome::Panicked`] /
/// [`Outcome::TimedOut`] as `failed` makes them.
pub(super) async fn bounded<T: Send + 'static>(
    timeout: Duration,
    work: BoxFuture<'static, T>,
    failed: impl FnOnce(Outcome) -> T,
) -> T {
    let mut task = tokio::spawn(work);
    match tokio::time::timeout(timeout, &mut task).await {
        Ok(Ok(output)) => output,
        Ok(Err(_)) => failed(Outcome::Panicked),
        Err(_) => {
            task.abort();
            failed(Outcome::TimedOut)
        }
    }
}
