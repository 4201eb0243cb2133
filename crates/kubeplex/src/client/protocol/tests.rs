use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::atomic::AtomicUsize;
use std::task::{Context, Poll};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::Connected;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};

use super::*;

/// A plain TCP connection that says, as an ALPN answer would, whether it speaks HTTP/2.
struct Tcp {
    io: TokioIo<tokio::net::TcpStream>,
    h2: bool,
}

impl Connection for Tcp {
    fn connected(&self) -> Connected {
        let connected = Connected::new();
        if self.h2 {
            connected.negotiated_h2()
        } else {
            connected
        }
    }
}

impl Read for Tcp {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl Write for Tcp {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// A local server speaking HTTP/2 (`h2`) or HTTP/1.1, its answers taking 100 ms (so a burst's requests are
/// in flight together); its URL.
async fn server(h2: bool) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let serve = hyper::service::service_fn(|_: Request<Incoming>| async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
            });
            let io = TokioIo::new(stream);
            tokio::spawn(async move {
                if h2 {
                    let builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
                    let _ = builder.serve_connection(io, serve).await;
                } else {
                    let builder = hyper::server::conn::http1::Builder::new();
                    let _ = builder.serve_connection(io, serve).await;
                }
            });
        }
    });
    url
}

/// A connector to local servers whose connections say they speak HTTP/2 (`h2`) or not, counting the
/// connections asked of it; each fails after `delay` while `refuse` is set, as a server that does not
/// answer.
#[derive(Clone)]
struct Connector {
    h2: bool,
    opened: Arc<AtomicUsize>,
    refuse: Arc<std::sync::atomic::AtomicBool>,
    delay: Duration,
}

impl Connector {
    fn new(h2: bool) -> Self {
        Self {
            h2,
            opened: Arc::default(),
            refuse: Arc::default(),
            delay: Duration::ZERO,
        }
    }

    fn opened(&self) -> usize {
        self.opened.load(Ordering::SeqCst)
    }
}

impl Service<Uri> for Connector {
    type Response = Tcp;
    type Error = io::Error;
    type Future = BoxFuture<'static, io::Result<Tcp>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            this.opened.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(this.delay).await;
            if this.refuse.load(Ordering::SeqCst) {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "no answer"));
            }
            let address = uri.authority().unwrap().as_str().to_owned();
            let stream = tokio::net::TcpStream::connect(address).await?;
            let h2 = this.h2;
            Ok(Tcp {
                io: TokioIo::new(stream),
                h2,
            })
        })
    }
}

/// The pools as the transport builds them, over `connector`.
fn negotiated(connector: Connector, may_speak_h2: bool) -> Negotiated<Connector> {
    Negotiated::new(connector, may_speak_h2, |opener, http2_only| {
        let client = hyper_util::client::legacy::Builder::new(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .http2_only(http2_only)
            .build::<_, Body>(opener)
            .map_err(BoxError::from);
        BoxCloneSyncService::new(client)
    })
}

/// `burst` requests sent together to `url`: what each answered, or why it failed.
async fn burst(sender: &Negotiated<Connector>, url: &str, burst: usize) -> Vec<Result<(), String>> {
    let requests = (0..burst).map(|_| {
        let request = Request::get(url).body(Body::empty()).unwrap();
        let sent = sender.clone().oneshot(request);
        async move {
            let response = sent.await.map_err(|e| crate::core::chain(&*e))?;
            let body = response.into_body().collect().await;
            body.map(drop).map_err(|e| e.to_string())
        }
    });
    let all = tokio::time::timeout(Duration::from_secs(60), futures::future::join_all(requests));
    all.await
        .expect("every request answered or failed within 60 s")
}

#[tokio::test]
async fn a_burst_to_a_fresh_pool_of_an_http2_server_opens_one_connection() {
    let url = server(true).await;
    let connector = Connector::new(true);
    let sender = negotiated(connector.clone(), true);
    let answered = burst(&sender, &url, 20).await;
    assert!(answered.iter().all(Result::is_ok), "{answered:?}");
    assert_eq!(
        connector.opened(),
        1,
        "twenty requests in flight on one connection"
    );
    let answered = burst(&sender, &url, 20).await;
    assert!(answered.iter().all(Result::is_ok), "{answered:?}");
    assert_eq!(connector.opened(), 1, "and the next burst on it too");
}

#[tokio::test]
async fn a_server_without_http2_gets_a_connection_per_request_in_flight() {
    let url = server(false).await;
    let connector = Connector::new(false);
    let sender = negotiated(connector.clone(), true);
    let answered = burst(&sender, &url, 10).await;
    assert!(answered.iter().all(Result::is_ok), "{answered:?}");
    assert_eq!(
        connector.opened(),
        10,
        "the first, then one per other request"
    );

    let (url, connector) = (server(false).await, Connector::new(false));
    let sender = negotiated(connector.clone(), false);
    let answered = burst(&sender, &url, 10).await;
    assert!(answered.iter().all(Result::is_ok), "{answered:?}");
    assert_eq!(
        connector.opened(),
        10,
        "known in advance: no first connection alone"
    );
}

#[tokio::test(start_paused = true)]
async fn a_burst_to_a_server_that_does_not_answer_fails_after_one_connect_timeout_not_one_each() {
    let url = server(true).await;
    let mut connector = Connector::new(true);
    connector.delay = Duration::from_secs(10);
    connector.refuse.store(true, Ordering::SeqCst);
    let no_answer = |answered: &[Result<(), String>]| {
        answered
            .iter()
            .all(|a| a.as_ref().is_err_and(|e| e.contains("no answer")))
    };

    // While the first connection is opened alone.
    let sender = negotiated(connector.clone(), true);
    let started = Instant::now();
    let answered = burst(&sender, &url, 5).await;
    assert!(no_answer(&answered), "{answered:?}");
    assert_eq!(
        connector.opened(),
        1,
        "the others failed with the first's cause"
    );
    assert!(
        started.elapsed() < Duration::from_secs(11),
        "{:?}",
        started.elapsed()
    );

    // Known to speak HTTP/2, with no connection left (hyper's pool has each request wait for the one
    // being opened, then try its own).
    let sender = negotiated(connector.clone(), true);
    sender
        .opener
        .learned
        .protocol
        .store(HTTP2, Ordering::SeqCst);
    let started = Instant::now();
    let answered = burst(&sender, &url, 5).await;
    assert!(no_answer(&answered), "{answered:?}");
    assert_eq!(connector.opened(), 2);
    assert!(
        started.elapsed() < Duration::from_secs(11),
        "{:?}",
        started.elapsed()
    );

    // The server answers again: the next attempt, past the failure's shadow, opens one connection.
    tokio::time::advance(FAILED_RECENTLY).await;
    connector.refuse.store(false, Ordering::SeqCst);
    let answered = burst(&sender, &url, 5).await;
    assert!(answered.iter().all(Result::is_ok), "{answered:?}");
    assert_eq!(connector.opened(), 3);
}

#[tokio::test]
async fn a_connection_that_could_not_be_opened_keeps_its_cause_readable() {
    let failure: BoxError = Box::new(OpenFailed(Arc::new(io::Error::new(
        io::ErrorKind::ConnectionRefused,
        "connection refused",
    ))));
    assert_eq!(crate::core::chain(&*failure), "connection refused");
    let cause = failure.source().and_then(|s| s.downcast_ref::<io::Error>());
    assert_eq!(
        cause.map(io::Error::kind),
        Some(io::ErrorKind::ConnectionRefused)
    );
}
