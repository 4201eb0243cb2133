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
mod tests {
    use std::time::Duration;

    use hyper_util::rt::TokioIo;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
    use tokio::time::Instant;

    use super::*;

    /// A fenced stream over one end of an in-memory pipe, as tokio I/O, and the pipe's other end.
    fn fenced_pipe(fence: &Fence) -> (TokioIo<FencedIo<TokioIo<DuplexStream>>>, DuplexStream) {
        let (ours, peer) = tokio::io::duplex(1024);
        let gate = Gate([fence.clone(), Fence::default()]);
        (TokioIo::new(FencedIo::new(TokioIo::new(ours), gate)), peer)
    }

    /// What the peer can read within a moment (the pipe is in memory: whatever was written is there at once).
    async fn received(peer: &mut DuplexStream) -> Vec<u8> {
        let mut buf = vec![0; 64];
        match tokio::time::timeout(Duration::from_millis(50), peer.read(&mut buf)).await {
            Ok(Ok(n)) => buf[..n].to_vec(),
            Ok(Err(e)) => panic!("reading the pipe: {e}"),
            Err(_) => Vec::new(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn writes_pass_while_open_and_none_reaches_the_peer_after_the_deadline() {
        let fence = Fence::closed();
        fence.open_for(Instant::now(), Duration::from_secs(10));
        let (mut io, mut peer) = fenced_pipe(&fence);

        io.write_all(b"PATCH /a").await.unwrap();
        io.flush().await.unwrap();
        assert_eq!(received(&mut peer).await, b"PATCH /a");

        // The process "was stopped" past its deadline: the next bytes are refused, none reach the peer.
        tokio::time::advance(Duration::from_secs(10)).await;
        let refused = io.write_all(b"DELETE /b").await.unwrap_err();
        assert_eq!(
            crate::core::fenced(&refused),
            Some(
                "not the leader: this replica's lease was not renewed in time, so it writes nothing"
            ),
            "the refusal is found through the error's chain: {refused}"
        );
        let vectored = [io::IoSlice::new(b"POST /c")];
        assert!(io.write_vectored(&vectored).await.is_err());
        assert!(io.flush().await.is_err());
        assert_eq!(
            received(&mut peer).await,
            b"",
            "nothing was sent after the deadline"
        );

        // Reads keep working: a response (or a watch event) still arrives.
        peer.write_all(b"HTTP/1.1 200 OK").await.unwrap();
        let mut buf = [0; 15];
        tokio::time::timeout(Duration::from_secs(1), io.read_exact(&mut buf))
            .await
            .expect("the read completes")
            .unwrap();
        assert_eq!(&buf, b"HTTP/1.1 200 OK");
    }

    #[tokio::test(start_paused = true)]
    async fn either_fence_of_the_gate_closes_it() {
        let (client, shard) = (
            Fence::closed(),
            Fence::closed_saying(crate::client::NOT_THE_SHARD_OWNER),
        );
        client.open_for(Instant::now(), Duration::from_secs(60));
        shard.open_for(Instant::now(), Duration::from_secs(5));
        let gate = Gate([client.clone(), shard.clone()]);
        assert!(gate.check().is_ok());
        tokio::time::advance(Duration::from_secs(5)).await;
        let refused = gate.check().unwrap_err();
        assert_eq!(
            crate::core::fenced(&refused),
            Some(crate::client::NOT_THE_SHARD_OWNER)
        );
        shard.open_for(Instant::now(), Duration::from_secs(5));
        client.close();
        assert!(
            gate.check()
                .unwrap_err()
                .to_string()
                .starts_with("not the leader")
        );
    }
}
