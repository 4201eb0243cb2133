//! Which protocol a connection pool speaks to its server, learned from the server's ALPN answer on the
//! pool's first connection. hyper's pool cannot know it in advance: until the first connection's answer is
//! in, it opens one for every request it cannot serve at once, then keeps one (a burst at start-up opened
//! a dozen to one server). So the first connection is opened alone, ahead of the requests, and handed to
//! the pool; once the server is known to speak HTTP/2 the pool opens a connection only when it has none
//! (a request waits for the one being opened) and shares it. A server or proxy without `h2` gets HTTP/1.1,
//! a connection per request in flight.
//!
//! When a connection cannot be opened, the requests that waited for it fail at once with its cause, not
//! one connect timeout each in turn, nor as merely "canceled".

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use hyper::Uri;
use hyper::body::Incoming;
use hyper::http::{Request, Response};
use hyper_util::client::legacy::connect::Connection;
use kube::client::Body;
use parking_lot::Mutex;
use tokio::time::Instant;
use tower::util::BoxCloneSyncService;
use tower::{BoxError, Service, ServiceExt};

/// How long after a connection failed to open the requests that waited for it take its cause.
pub(super) const FAILED_RECENTLY: Duration = Duration::from_secs(1);

/// One connection pool's way of sending a request.
pub(super) type Sender = BoxCloneSyncService<Request<Body>, Response<Incoming>, BoxError>;

const UNKNOWN: u8 = 0;
const HTTP2: u8 = 1;
const HTTP1: u8 = 2;

/// What a pool knows of its server, shared by its connectors and its sender.
struct Learned<Io> {
    protocol: AtomicU8,
    /// The connection opened to learn it, until the pool asks for one.
    first: Mutex<Option<Io>>,
    /// One request at a time opens the first connection.
    learning: tokio::sync::Mutex<()>,
    /// The last failure to open a connection, and when.
    failed: Mutex<Option<(Instant, Arc<dyn StdError + Send + Sync>)>>,
}

impl<Io: Connection> Learned<Io> {
    fn protocol(&self) -> u8 {
        self.protocol.load(Ordering::Acquire)
    }

    /// The failure to open a connection that came less than [`FAILED_RECENTLY`] ago.
    fn recent_failure(&self) -> Option<BoxError> {
        let failed = self.failed.lock();
        let (at, cause) = failed.as_ref()?;
        (at.elapsed() < FAILED_RECENTLY).then(|| Box::new(OpenFailed(cause.clone())) as BoxError)
    }

    /// A connection opened by `connector`, its failure kept for the attempts behind it.
    async fn open<C>(&self, connector: C, uri: Uri) -> Result<Io, BoxError>
    where
        C: Service<Uri, Response = Io>,
        C::Error: Into<BoxError>,
    {
        match connector.oneshot(uri).await {
            Ok(io) => {
                *self.failed.lock() = None;
                Ok(io)
            }
            Err(error) => {
                let cause: Arc<dyn StdError + Send + Sync> = Arc::from(error.into());
                *self.failed.lock() = Some((Instant::now(), cause.clone()));
                Err(Box::new(OpenFailed(cause)))
            }
        }
    }
}

/// A connection that could not be opened: the cause's words, and the cause as its source (a retry, or a
/// client that classifies failures, reads through it).
#[derive(Debug)]
struct OpenFailed(Arc<dyn StdError + Send + Sync>);

impl fmt::Display for OpenFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl StdError for OpenFailed {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.0)
    }
}

/// A pool's connector: hands over the first connection, then opens new ones through `inner`. The
/// HTTP/2 pool's (`http2`) takes a connection without `h2` for the server having stopped offering it.
pub(super) struct Opener<C: Service<Uri>> {
    inner: C,
    learned: Arc<Learned<C::Response>>,
    http2: bool,
}

impl<C: Service<Uri> + Clone> Clone for Opener<C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            learned: self.learned.clone(),
            http2: self.http2,
        }
    }
}

impl<C> Service<Uri> for Opener<C>
where
    C: Service<Uri> + Clone + Send + 'static,
    C::Response: Connection + Send + 'static,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<C::Response, BoxError>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxError>> {
        // The inner connector is made ready when a connection is opened through it.
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let (inner, learned, http2) = (self.inner.clone(), self.learned.clone(), self.http2);
        Box::pin(async move {
            // The HTTP/2 pool takes only a connection that speaks it (one left for HTTP/1.1 is the other's).
            let first = {
                let mut first = learned.first.lock();
                let fits = |io: &C::Response| !http2 || io.connected().is_negotiated_h2();
                first.take_if(|io| fits(io))
            };
            if let Some(io) = first {
                return Ok(io);
            }
            let io = learned.open(inner, uri).await?;
            if http2 && !io.connected().is_negotiated_h2() {
                learned.protocol.store(HTTP1, Ordering::Release);
                *learned.first.lock() = Some(io);
                return Err(
                    "the server stopped offering HTTP/2 (ALPN h2); the next requests use HTTP/1.1"
                        .into(),
                );
            }
            Ok(io)
        })
    }
}

/// A pool that speaks HTTP/2 to a server that offers it and HTTP/1.1 otherwise, sending each request by
/// what its first connection learned (opened by the first request, alone).
pub(super) struct Negotiated<C: Service<Uri>> {
    /// The pool opening one connection when it has none, for a server known to speak HTTP/2.
    http2: Sender,
    /// The pool opening a connection per request in flight (ALPN still read: HTTP/2 if offered).
    http1: Sender,
    /// `http1`'s connector, which opens the first connection.
    opener: Opener<C>,
}

impl<C: Service<Uri> + Clone> Clone for Negotiated<C> {
    fn clone(&self) -> Self {
        Self {
            http2: self.http2.clone(),
            http1: self.http1.clone(),
            opener: self.opener.clone(),
        }
    }
}

impl<C> Negotiated<C>
where
    C: Service<Uri> + Clone + Send + Sync + 'static,
    C::Response: Connection + Send + 'static,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    /// A pool over `connector`: `pool(connector, http2_only)` builds the hyper pool of either kind. `may_speak_h2`
    /// false (plain `http://`, or TLS not offering `h2`) is HTTP/1.1 from the start, with no first connection opened alone.
    pub(super) fn new(
        connector: C,
        may_speak_h2: bool,
        pool: impl Fn(Opener<C>, bool) -> Sender,
    ) -> Self {
        let protocol = if may_speak_h2 { UNKNOWN } else { HTTP1 };
        let learned = Arc::new(Learned {
            protocol: AtomicU8::new(protocol),
            first: Mutex::default(),
            learning: tokio::sync::Mutex::default(),
            failed: Mutex::default(),
        });
        let opener = |http2| Opener {
            inner: connector.clone(),
            learned: learned.clone(),
            http2,
        };
        Self {
            http2: pool(opener(true), true),
            http1: pool(opener(false), false),
            opener: opener(false),
        }
    }

    /// Opens the first connection, unless another request has, and learns from it.
    async fn learn(&self, uri: &Uri) -> Result<(), BoxError> {
        let learned = &self.opener.learned;
        let _alone = learned.learning.lock().await;
        if learned.protocol() != UNKNOWN {
            return Ok(());
        }
        if let Some(failure) = learned.recent_failure() {
            return Err(failure);
        }
        let io = learned
            .open(self.opener.inner.clone(), destination(uri)?)
            .await?;
        let protocol = if io.connected().is_negotiated_h2() {
            HTTP2
        } else {
            HTTP1
        };
        *learned.first.lock() = Some(io);
        learned.protocol.store(protocol, Ordering::Release);
        Ok(())
    }
}

/// The server a request goes to, as hyper's pool names it to its connector.
fn destination(uri: &Uri) -> Result<Uri, BoxError> {
    let (Some(scheme), Some(authority)) = (uri.scheme(), uri.authority()) else {
        return Err(format!("{uri} names no server").into());
    };
    Ok(Uri::builder()
        .scheme(scheme.clone())
        .authority(authority.clone())
        .path_and_query("/")
        .build()?)
}

impl<C> Service<Request<Body>> for Negotiated<C>
where
    C: Service<Uri> + Clone + Send + Sync + 'static,
    C::Response: Connection + Send + 'static,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = Response<Incoming>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Response<Incoming>, BoxError>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxError>> {
        // hyper's pools are always ready.
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            if this.opener.learned.protocol() == UNKNOWN {
                this.learn(request.uri()).await?;
            }
            if this.opener.learned.protocol() != HTTP2 {
                return this.http1.oneshot(request).await;
            }
            // The requests that waited for a connection which could not be opened fail as "canceled":
            // they fail with its cause instead.
            let sent = this.http2.oneshot(request).await;
            sent.map_err(|error| {
                let connect = error
                    .downcast_ref::<hyper_util::client::legacy::Error>()
                    .is_some_and(hyper_util::client::legacy::Error::is_connect);
                match this.opener.learned.recent_failure() {
                    Some(failure) if connect => failure,
                    _ => error,
                }
            })
        })
    }
}

#[cfg(test)]
mod tests;
