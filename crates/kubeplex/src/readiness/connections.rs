//! The accept loop the probe port, the secure metrics port and the webhook server share, and the
//! connections it keeps.
//!
//! Each port is reachable by anything in the cluster network, so the loop defends itself: at most
//! [`MAX_CONNECTIONS`] at once (a new one closes the oldest that never sent a request), a TLS handshake and
//! the request headers must each arrive within [`HEADER_TIMEOUT`] and the headers stay under
//! [`MAX_HEADER_BYTES`], a connection lives at most [`CONNECTION_TIMEOUT`], and a failing `accept` (e.g.
//! out of file descriptors) frees a descriptor or backs off instead of spinning. Only the webhook routes
//! read a request body, up to a bound of their own. hyper serves each connection with the limits; axum routes.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::task::AbortHandle;
use tokio_rustls::TlsAcceptor;

/// The most connections served at once; kubelet needs one per probe, Prometheus one per target.
pub(super) const MAX_CONNECTIONS: usize = 64;
/// How long a client may take to finish the TLS handshake, and then to send its request headers.
pub(super) const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest a connection lives, however busy.
pub(super) const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest request head accepted.
pub(super) const MAX_HEADER_BYTES: usize = 16 * 1024;

/// Serves `router` on `listener` until the task is aborted; over TLS with `tls`. `server` names it in logs.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<TlsAcceptor>,
    server: &'static str,
) {
    let mut open = Connections::new(server);
    let mut backoff = Duration::ZERO;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => {
                backoff = Duration::ZERO;
                accepted
            }
            Err(error) => {
                // Out of file descriptors (or another resource): free one by closing the oldest idle
                // connection, else wait; retrying at once would only fail again, at 100 % CPU.
                if open.evict_one() {
                    continue;
                }
                backoff = (backoff * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
                if backoff == Duration::from_millis(10) {
                    tracing::warn!(%error, "{server}: accept failed; backing off");
                }
                tokio::time::sleep(backoff).await;
                continue;
            }
        };
        if open.len() >= MAX_CONNECTIONS {
            open.evict_one();
        }
        let served = Arc::new(AtomicBool::new(false));
        let (router, flag, tls) = (router.clone(), served.clone(), tls.clone());
        let task = tokio::spawn(async move {
            let connection = async {
                match tls {
                    None => http(stream, peer, router, flag).await,
                    Some(tls) => {
                        match tokio::time::timeout(HEADER_TIMEOUT, tls.accept(stream)).await {
                            Ok(Ok(stream)) => http(stream, peer, router, flag).await,
                            Ok(Err(error)) => Err(format!("TLS handshake failed: {error}")),
                            Err(_) => Err(format!("no TLS handshake within {HEADER_TIMEOUT:?}")),
                        }
                    }
                }
            };
            match tokio::time::timeout(CONNECTION_TIMEOUT, connection).await {
                Ok(Err(error)) => {
                    tracing::debug!(%error, "{server}: connection ended with an error")
                }
                Err(_) => {
                    tracing::debug!("{server}: connection closed after {CONNECTION_TIMEOUT:?}")
                }
                Ok(Ok(())) => {}
            }
        });
        open.add(served, task.abort_handle());
    }
}

/// Serves HTTP/1.1 on `stream` from `peer` with the limits; `served` is set when a request arrives. Each
/// request carries its peer (axum's `ConnectInfo`) for the routes that answer the local host more.
async fn http<S>(
    stream: S,
    peer: SocketAddr,
    router: Router,
    served: Arc<AtomicBool>,
) -> Result<(), String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        served.store(true, Ordering::Relaxed);
        request.extensions_mut().insert(ConnectInfo(peer));
        tower::ServiceExt::oneshot(router.clone(), request)
    });
    http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_HEADER_BYTES)
        .serve_connection(TokioIo::new(stream), service)
        .await
        .map_err(|error| error.to_string())
}

/// The connections being served, oldest first; closed with the accept loop (a kept-alive connection must
/// not go on answering for a server that stopped).
struct Connections {
    server: &'static str,
    open: VecDeque<(Arc<AtomicBool>, AbortHandle)>,
    evicted: u64,
}

impl Drop for Connections {
    fn drop(&mut self) {
        for (_, task) in &self.open {
            task.abort();
        }
    }
}

impl Connections {
    fn new(server: &'static str) -> Self {
        Self {
            server,
            open: VecDeque::new(),
            evicted: 0,
        }
    }

    fn add(&mut self, served: Arc<AtomicBool>, task: AbortHandle) {
        self.open.push_back((served, task));
    }

    fn len(&mut self) -> usize {
        self.open.retain(|(_, task)| !task.is_finished());
        self.open.len()
    }

    /// Closes the oldest connection that never sent a request, else the oldest one: a flood of idle
    /// connections then costs its own connections, never the probes of kubelet, which sends its request
    /// as soon as it connects. `false` when there was none to close.
    fn evict_one(&mut self) -> bool {
        self.open.retain(|(_, task)| !task.is_finished());
        let victim = self
            .open
            .iter()
            .position(|(served, _)| !served.load(Ordering::Relaxed))
            .or((!self.open.is_empty()).then_some(0));
        let Some(victim) = victim.and_then(|i| self.open.remove(i)) else {
            return false;
        };
        victim.1.abort();
        if self.evicted.is_multiple_of(1000) {
            tracing::warn!(
                limit = MAX_CONNECTIONS,
                "{}: too many connections; closing the oldest idle ones",
                self.server
            );
        }
        self.evicted += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn a_kept_alive_connection_closes_when_its_server_stops() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let router = Router::new().route("/", get(|| async { "ok" }));
        let server = tokio::spawn(serve(listener, router, None, "test server"));
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let request = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
        stream.write_all(request).await.unwrap();
        let mut answer = [0; 1024];
        let read = stream.read(&mut answer).await.unwrap();
        assert!(answer[..read].starts_with(b"HTTP/1.1 200"));

        server.abort();
        assert!(server.await.unwrap_err().is_cancelled());
        // The connection is closed (end of stream or a reset), not answered again.
        let _ = stream.write_all(request).await;
        let closed = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut answer)).await;
        assert!(matches!(closed, Ok(Ok(0) | Err(_))), "{closed:?}");
    }
}
