//! The write fence: with leader election on, every request that changes something (anything but `GET`,
//! `HEAD`, `OPTIONS`) may leave only while this replica's lease is still valid — so applies, prunes, status
//! writes, finalizers and Events are all fenced, whichever path sends them, and a replica that missed its
//! renewal deadline (frozen, starved, partitioned) writes nothing.
//!
//! It is checked twice: when a write enters the client ([`FencedService`], a fast refusal), and when its
//! bytes are written to the socket ([`super::fenced_io`]), so a write held anywhere in between (connection
//! checkout, TLS, a process stopped with SIGSTOP) is not sent once the deadline passed.
//!
//! The deadline is monotonic time (tokio's clock, so paused-time tests drive it): a process stopped with
//! SIGSTOP finds it passed the moment it resumes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use hyper::http::{Method, Request};
use tokio::time::Instant;
use tower::{Layer, Service};

use crate::core::Fenced;

/// Who holds the lease, as this replica last saw it. Without leader election: this replica, always.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Role {
    /// This replica leads: its controllers run.
    pub(crate) leader: bool,
    /// The holder's identity, when known.
    pub(crate) holder: Option<String>,
}

impl Role {
    /// The role of a replica without leader election.
    pub(crate) fn sole() -> Self {
        Self {
            leader: true,
            holder: None,
        }
    }
}

/// What a write refused by the leader election's fence is told.
const NOT_THE_LEADER: &str =
    "not the leader: this replica's lease was not renewed in time, so it writes nothing";
/// What a write refused by a shard's fence is told.
pub(crate) const NOT_THE_SHARD_OWNER: &str = "not the owner of this parent's shard: its Lease moved to another replica or was not \
     renewed in time, so this replica writes nothing for it";

/// Whether this replica may write now. Without leader election the fence is always open.
#[derive(Clone, Default)]
pub(crate) struct Fence(Option<Arc<Deadline>>);

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Fence(leader election)"
        } else {
            "Fence(open)"
        })
    }
}

/// Until when writes are allowed, as milliseconds since `origin` (0: not at all).
struct Deadline {
    origin: Instant,
    until_ms: AtomicU64,
    refusal: &'static str,
}

impl Fence {
    /// A fence that is closed until [`open_for`](Self::open_for) is called.
    pub(crate) fn closed() -> Self {
        Self::closed_saying(NOT_THE_LEADER)
    }

    /// A closed fence whose refusals say `refusal`.
    pub(crate) fn closed_saying(refusal: &'static str) -> Self {
        Self(Some(Arc::new(Deadline {
            origin: Instant::now(),
            until_ms: AtomicU64::new(0),
            refusal,
        })))
    }

    /// Writes are allowed for `span` from `from` (saturating: a span too long to count is for ever).
    pub(crate) fn open_for(&self, from: Instant, span: Duration) {
        if let Some(d) = &self.0 {
            let ms = from
                .saturating_duration_since(d.origin)
                .saturating_add(span)
                .as_millis();
            d.until_ms
                .store(u64::try_from(ms).unwrap_or(u64::MAX), Ordering::Release);
        }
    }

    /// No writes from now on.
    pub(crate) fn close(&self) {
        if let Some(d) = &self.0 {
            d.until_ms.store(0, Ordering::Release);
        }
    }

    /// Whether a write may be sent now.
    pub(crate) fn allows_writes(&self) -> bool {
        self.refusal().is_none()
    }

    /// What a write is told now: `None` while it may be sent.
    pub(crate) fn refusal(&self) -> Option<&'static str> {
        let d = self.0.as_ref()?;
        let now = u64::try_from(d.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        (now >= d.until_ms.load(Ordering::Acquire)).then_some(d.refusal)
    }

    /// Which fence this is, for keying what is built per fence (0: the open fence).
    pub(crate) fn key(&self) -> usize {
        self.0.as_ref().map_or(0, |d| Arc::as_ptr(d).addr())
    }
}

/// A fence a write must pass besides its client's own, carried in the request's extensions: a shard's, put
/// there by a shard's client, so the write is also fenced at the socket by its shard.
#[derive(Clone, Debug, Default)]
pub(crate) struct AlsoFencedBy(pub(crate) Fence);

/// A request that changes nothing passes whatever the fence says (a watch is a `GET`).
pub(crate) fn is_read(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

impl<S> Layer<S> for Fence {
    type Service = FencedService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        FencedService {
            inner,
            fence: self.clone(),
        }
    }
}

/// A client's service with the fence in front.
#[derive(Clone)]
pub(crate) struct FencedService<S> {
    inner: S,
    fence: Fence,
}

impl<S, B> Service<Request<B>> for FencedService<S>
where
    S: Service<Request<B>>,
    S::Response: Send + 'static,
    S::Error: Into<tower::BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = tower::BoxError;
    type Future = BoxFuture<'static, Result<S::Response, tower::BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The fast refusal; the bytes are fenced again at the socket.
        if !is_read(request.method())
            && let Some(refusal) = self.fence.refusal()
        {
            return Box::pin(std::future::ready(Err(Fenced(refusal).into())));
        }
        let response = self.inner.call(request);
        Box::pin(async move { response.await.map_err(Into::into) })
    }
}

#[cfg(test)]
mod tests {
    use tower::ServiceExt;

    use super::*;

    fn service(
        fence: &Fence,
    ) -> FencedService<tower::util::BoxCloneService<Request<()>, u16, tower::BoxError>> {
        let inner = tower::service_fn(|_: Request<()>| async { Ok::<_, tower::BoxError>(200_u16) });
        fence.layer(tower::util::BoxCloneService::new(inner))
    }

    async fn send(fence: &Fence, method: Method) -> Result<u16, String> {
        let request = Request::builder().method(method).body(()).unwrap();
        service(fence)
            .oneshot(request)
            .await
            .map_err(|e| e.to_string())
    }

    #[tokio::test]
    async fn without_election_everything_passes() {
        let fence = Fence::default();
        assert_eq!(send(&fence, Method::PATCH).await, Ok(200));
    }

    #[tokio::test]
    async fn writes_pass_only_before_the_deadline_reads_always() {
        let fence = Fence::closed();
        for method in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
            let refused = send(&fence, method).await.unwrap_err();
            assert!(refused.starts_with("not the leader"), "{refused}");
        }
        assert_eq!(
            send(&fence, Method::GET).await,
            Ok(200),
            "a watch or list still works"
        );

        fence.open_for(Instant::now(), Duration::from_secs(60));
        assert_eq!(send(&fence, Method::PATCH).await, Ok(200));
        // A deadline that passed (a renewal missed, or a process stopped meanwhile) closes it by itself.
        fence.open_for(Instant::now(), Duration::ZERO);
        assert!(send(&fence, Method::DELETE).await.is_err());
        fence.open_for(Instant::now(), Duration::from_secs(60));
        fence.close();
        assert!(send(&fence, Method::POST).await.is_err());
    }
}
