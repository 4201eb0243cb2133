//! The fence at the socket: the connections that carry writes wrap their TCP stream (under TLS) in a
//! [`FencedIo`] that refuses to write once a fence closed. The fence is judged at the moment bytes are
//! handed to the kernel, not when the request entered the client: a write held between the two (waiting for
//! a connection, for TLS, or in a process stopped with SIGSTOP) is not sent after the deadline, and one cut
//! in the middle of its body reaches the server incomplete, which rejects it.
//!
//! Reads and watches go over connections of their own, without this wrapper, so a closed fence never cuts
//! them: a standby's caches stay warm.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use hyper::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection};
use tower::Service;

use super::fence::Fence;
use crate::core::Fenced;

/// The fences a connection's writes must all pass: its client's, and a shard's (open when there is none).
#[derive(Clone, Debug, Default)]
pub(crate) struct Gate(pub(crate) [Fence; 2]);

impl Gate {
    /// What a write is told now: `None` while every fence is open.
    fn refusal(&self) -> Option<&'static str> {
        self.0.iter().find_map(Fence::refusal)
    }

    /// `Ok` while every fence is open, else the refusal as the I/O error a write fails with.
    fn check(&self) -> io::Result<()> {
        match self.refusal() {
            None => Ok(()),
            Some(refusal) => Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                Fenced(refusal),
            )),
        }
    }
}

/// A connection's stream whose writes pass only while its gate is open. Reads are never held back.
#[derive(Debug)]
pub(crate) struct FencedIo<T> {
    inner: T,
    gate: Gate,
}

impl<T> FencedIo<T> {
    pub(crate) fn new(inner: T, gate: Gate) -> Self {
        Self { inner, gate }
    }
}

impl<T: Read + Unpin> Read for FencedIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> Write for FencedIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        // Checked on every call, right before the bytes go to the kernel (the inner stream writes at once).
        self.gate.check()?;
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.gate.check()?;
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.gate.check()?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    /// Closing is allowed: a request cut short by the fence then reaches the server incomplete.
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<T: Connection> Connection for FencedIo<T> {
    fn connected(&self) -> Connected {
        self.inner.connected()
    }
}

/// A connector whose connections are [`FencedIo`]s behind `gate`; TLS goes on top, so every byte of it —
/// handshake included — passes the gate on its way to the socket.
#[derive(Clone, Debug)]
pub(crate) struct FencedConnector<C> {
    inner: C,
    gate: Gate,
}

impl<C> FencedConnector<C> {
    pub(crate) fn new(inner: C, gate: Gate) -> Self {
        Self { inner, gate }
    }
}

impl<C> Service<Uri> for FencedConnector<C>
where
    C: Service<Uri>,
    C::Future: Send + 'static,
{
    type Response = FencedIo<C::Response>;
    type Error = C::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.inner.call(uri);
        let gate = self.gate.clone();
        Box::pin(async move { Ok(FencedIo::new(connecting.await?, gate)) })
    }
}

#[cfg(test)]
mod tests;
