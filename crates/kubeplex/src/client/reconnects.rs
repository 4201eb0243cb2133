//! When a cluster is reached anew: its reads share one HTTP/2 connection, so a multiplexed connection
//! established while none is left — all closed, after an outage or a server restart — is the cluster
//! reached again, perhaps another one at the same address; its identity gate is told. A second connection
//! opened beside a live one (hyper races one while the first is busy) is no reconnection. Over HTTP/1.1 a
//! connection is opened per request in flight, and an outage is seen by the pings instead.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use hyper::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection};
use tower::Service;

use super::identity::IdentityGate;

/// The multiplexed connections of one cluster's reads alive now, and whether there ever was one.
#[derive(Debug, Default)]
struct Live {
    now: AtomicUsize,
    ever: AtomicBool,
}

/// A connector whose multiplexed connections are counted, the cluster's gate told when one is
/// established while none is alive (and one was before).
#[derive(Clone)]
pub(crate) struct Reconnects<C> {
    inner: C,
    gate: Arc<IdentityGate>,
    live: Arc<Live>,
}

impl<C> Reconnects<C> {
    pub(crate) fn new(inner: C, gate: Arc<IdentityGate>) -> Self {
        let live = Arc::default();
        Self { inner, gate, live }
    }
}

impl<C> Service<Uri> for Reconnects<C>
where
    C: Service<Uri>,
    C::Response: Connection + Send + 'static,
    C::Future: Send + 'static,
{
    type Response = Counted<C::Response>;
    type Error = C::Error;
    type Future = BoxFuture<'static, Result<Self::Response, C::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.inner.call(uri);
        let (gate, live) = (self.gate.clone(), self.live.clone());
        Box::pin(async move {
            let inner = connecting.await?;
            if !inner.connected().is_negotiated_h2() {
                return Ok(Counted { inner, live: None });
            }
            let none_before = live.now.fetch_add(1, Ordering::AcqRel) == 0;
            if none_before && live.ever.swap(true, Ordering::AcqRel) {
                gate.reconnected();
            }
            let live = Some(live);
            Ok(Counted { inner, live })
        })
    }
}

/// A connection counted among its cluster's live multiplexed ones until it is dropped.
#[derive(Debug)]
pub(crate) struct Counted<T> {
    inner: T,
    live: Option<Arc<Live>>,
}

impl<T> Drop for Counted<T> {
    fn drop(&mut self) {
        if let Some(live) = &self.live {
            live.now.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl<T: Read + Unpin> Read for Counted<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> Write for Counted<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<T: Connection> Connection for Counted<T> {
    fn connected(&self) -> Connected {
        self.inner.connected()
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use tower::util::BoxCloneService;

    use super::*;

    /// A connection that says whether it speaks HTTP/2.
    struct Fake(bool);

    impl Connection for Fake {
        fn connected(&self) -> Connected {
            let connected = Connected::new();
            if self.0 {
                connected.negotiated_h2()
            } else {
                connected
            }
        }
    }

    type Fakes = BoxCloneService<Uri, Fake, Infallible>;

    /// A connector of connections speaking HTTP/2 (`h2`) or not, telling `gate`, which knows its cluster.
    fn connecting(h2: bool) -> (Reconnects<Fakes>, Arc<IdentityGate>) {
        let gate = Arc::new(IdentityGate::default());
        gate.hold();
        gate.pass();
        let connect = tower::service_fn(move |_: Uri| async move { Ok(Fake(h2)) });
        (
            Reconnects::new(BoxCloneService::new(connect), gate.clone()),
            gate,
        )
    }

    async fn connect(connector: &mut Reconnects<Fakes>) -> Counted<Fake> {
        connector
            .call(Uri::from_static("https://cluster"))
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn only_a_connection_made_when_none_is_left_is_a_reconnection() {
        let (mut connector, gate) = connecting(true);
        let first = connect(&mut connector).await;
        assert!(!gate.is_held(), "the first connection is no reconnection");
        let beside = connect(&mut connector).await;
        drop(first);
        assert!(
            !gate.is_held(),
            "one opened beside a live one is none either"
        );
        drop(beside);
        let _again = connect(&mut connector).await;
        assert!(
            gate.is_held(),
            "every connection was lost, then one made: reached anew"
        );

        let (mut connector, gate) = connecting(false);
        drop(connect(&mut connector).await);
        drop(connect(&mut connector).await);
        assert!(!gate.is_held(), "HTTP/1.1 connections are not counted");
    }
}
