//! How a cluster's client is assembled: kube's own pieces — base URI, retries, extra headers, TLS,
//! connect/read/write timeouts — put together here rather than by `ClientBuilder::try_from`, because kube's
//! builder cannot be given a connector and the fence must reach the socket ([`super::fenced_io`]). The
//! authentication is the cluster's shared [`Authorization`](super::authorization) in kube's layer's place:
//! kube's, plus an exec plugin's token asked for again before it expires and when it is rejected.
//!
//! Requests are routed by method: reads and watches to a connection pool of their own, writes to another
//! whose connections pass the fence on every byte they send. A shard's client adds its shard's fence to its
//! writes ([`AlsoFencedBy`]); they go over a third pool, one per fence, so no connection carries writes of
//! two shards.
//!
//! Every pool speaks HTTP/2 where the server does (over TLS, by ALPN, as client-go): one connection carries
//! a cluster's reads and watches, another its writes (one more per shard in use), even for a burst on a
//! fresh pool — its first connection is opened alone and tells ([`super::protocol`]). A connection on which
//! nothing arrives for [`SILENCE_BEFORE_PING`] is sent a PING, closed when no answer comes within
//! [`PING_ANSWER_WITHIN`] — its watches fail, and their cluster stops counting as ready, within seconds of a
//! server that stops answering (frozen, partitioned), where a watch over HTTP/1.1 waits for its read
//! timeout. A PING is a frame, not a request: the server's handlers, audit log and rate limits never see it.
//! The fence is the write connection's: when it closes, no byte of any write on it leaves — as it would stop
//! each on a connection of its own — and the writes in flight on it fail together. Sockets are
//! `TCP_NODELAY`, as Go's: a connection's small frames (a request's HEADERS, WINDOW_UPDATEs, PING answers)
//! would otherwise wait on Nagle's algorithm for the server's delayed ACK, tens of milliseconds each.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use std::time::Duration;

use futures::future::BoxFuture;
use hyper::Uri;
use hyper::body::Incoming;
use hyper::http::{Request, Response};
use hyper::rt::{Read, Write};
use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::connect::{Connection, HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::Client;
use kube::client::middleware::ExtraHeadersLayer;
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ClientBuilder, ConfigExt};

use tower::retry::RetryLayer;
use tower::util::BoxCloneSyncService;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};
use tower_http::classify::ServerErrorsFailureClass;
use tower_http::trace::TraceLayer;

use super::access::Access;
use super::authorization::AuthorizeLayer;
use super::fence::{AlsoFencedBy, Fence, is_read};
use super::fenced_io::{FencedConnector, Gate};
use super::identity::{IDENTITY_WAIT, IdentityGate};
use super::protocol::{Negotiated, Sender};
use super::reconnects::Reconnects;
use super::tls::Tls;
use crate::core::{Fenced, IdentityRefusal, chain};

/// How long a connection may sit idle in a pool before it is closed (Go's `http.Transport` default, which
/// client-go keeps).
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Idle connections a pool keeps per server. HTTP/1 takes a connection per request in flight: the others
/// of a burst are closed as their requests end, rather than kept, each with its buffers and TLS state.
const IDLE_PER_HOST: usize = 32;

/// The most a connection's read buffer grows to (hyper's default is ~400 KB). hyper grows it while reads
/// fill it and never gives the room back: a watch that once streamed a large object (a parent whose status
/// lists a thousand members) would hold ~400 KB for as long as it runs. Bodies pass through in pieces of
/// this size; response heads are far smaller.
const READ_BUFFER_MAX: usize = 32 * 1024;

/// How long a multiplexed connection may stay silent (no frame from the server) before it is sent a PING.
pub(crate) const SILENCE_BEFORE_PING: Duration = Duration::from_secs(2);

/// How long a PING may go unanswered before its connection is closed, failing every request and watch on
/// it. A server that answers nothing for this long has stopped (client-go waits 30 + 15 s; kubeplex wants a
/// frozen cluster in its parents' status within seconds).
pub(crate) const PING_ANSWER_WITHIN: Duration = Duration::from_secs(3);

/// A client of `access` whose writes pass `fence` when they enter it and when their bytes reach the
/// socket.
/// Its reads' connections tell the cluster's identity gate when they are established anew.
pub(crate) fn client(access: &Access, fence: &Fence) -> Result<Client, String> {
    assemble(access, fence, tcp(), true)
}

/// A client of its own on `access`'s credentials, with its own connections and no fence (the pings' and
/// the leases' clients); its connections tell nobody.
pub(crate) fn own_client(access: &Access) -> Result<Client, String> {
    assemble(access, &Fence::default(), tcp(), false)
}

fn tcp() -> HttpConnector {
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    tcp
}

/// As [`client`], over `tcp` for the connections (tests hold connections back with it).
#[cfg(test)]
pub(crate) fn client_over<C>(access: &Access, fence: &Fence, tcp: C) -> Result<Client, String>
where
    C: Service<Uri> + Clone + Send + Sync + 'static,
    C::Response: Read + Write + Connection + Send + Unpin + 'static,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    assemble(access, fence, tcp, true)
}

/// The client: with `reconnects`, a new connection of its reads holds the cluster's writes until it is
/// asked again which cluster it is.
fn assemble<C>(access: &Access, fence: &Fence, tcp: C, reconnects: bool) -> Result<Client, String>
where
    C: Service<Uri> + Clone + Send + Sync + 'static,
    C::Response: Read + Write + Connection + Send + Unpin + 'static,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    let config = access.config();
    if let Some(proxy) = &config.proxy_url {
        let proxy = without_userinfo(proxy);
        return Err(format!(
            "a proxy is configured ({proxy}: the kubeconfig's proxy-url or HTTPS_PROXY), but kubeplex's clients \
             connect to the API server directly (its write fence works on the connections it opens itself); \
             remove the proxy for this context"
        ));
    }
    let pool = Pool {
        tls: access.tls.clone(),
        connect: config.connect_timeout,
        read: config.read_timeout,
        write: config.write_timeout,
        reset_reader_on_write: config.reset_reader_on_write,
        http2: config.cluster_url.scheme_str() == Some("https") && access.tls.offers_http2(),
    };
    let told = reconnects.then(|| access.identity.clone());
    let reads = pool.sender(tcp.clone(), told);
    let writes = Writes {
        fence: fence.clone(),
        make: Box::new(move |gate| pool.sender(FencedConnector::new(tcp.clone(), gate), None)),
        by_fence: Mutex::default(),
    };
    let route = Route {
        reads,
        writes: Arc::new(writes),
        identity: access.identity.clone(),
    };
    let auth = AuthorizeLayer(access.authorization.clone());
    let headers: ExtraHeadersLayer = config.extra_headers_layer().map_err(|e| chain(&e))?;
    let retry = config
        .default_retry
        .then(|| RetryLayer::new(RetryPolicy::server_retry()));
    let last_answer = access.last_answer.clone();
    // kube's own stack, in its order; the fence's socket-level half is in the route's write connections.
    // Every attempt's answer is stamped, beneath the retries, for the pings.
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(retry)
        .layer(auth)
        .layer(headers)
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(|request: &Request<Body>| {
                    tracing::debug_span!(
                        "HTTP",
                        http.method = %request.method(),
                        http.url = %request.uri(),
                        http.status_code = tracing::field::Empty,
                        otel.name = request.extensions().get::<&'static str>().unwrap_or(&"HTTP"),
                        otel.kind = "client",
                        otel.status_code = tracing::field::Empty,
                    )
                })
                .on_request(())
                .on_response(
                    |response: &Response<Incoming>, _: Duration, span: &tracing::Span| {
                        let status = response.status();
                        span.record("http.status_code", status.as_u16());
                        if status.is_client_error() || status.is_server_error() {
                            span.record("otel.status_code", "ERROR");
                        }
                    },
                )
                .on_body_chunk(())
                .on_eos(())
                .on_failure(
                    |failure: ServerErrorsFailureClass, _: Duration, span: &tracing::Span| {
                        span.record("otel.status_code", "ERROR");
                        tracing::debug!(%failure, "request failed");
                    },
                ),
        )
        .map_response(move |response: Response<Incoming>| {
            last_answer.stamp(response.status());
            response
        })
        .service(route);
    Ok(ClientBuilder::new(service, config.default_namespace.clone()).build())
}

/// A proxy's address as it may be shown: without the `user:password@` it may carry.
fn without_userinfo(proxy: &Uri) -> String {
    let scheme = proxy
        .scheme_str()
        .map_or(String::new(), |s| format!("{s}://"));
    let host = proxy.host().unwrap_or_default();
    let port = proxy.port().map_or(String::new(), |p| format!(":{p}"));
    format!("{scheme}{host}{port}")
}

/// What every connection pool of a cluster is built with.
struct Pool {
    tls: Arc<Tls>,
    connect: Option<Duration>,
    read: Option<Duration>,
    write: Option<Duration>,
    reset_reader_on_write: bool,
    /// Whether the server may speak HTTP/2: TLS offering `h2`.
    http2: bool,
}

impl Pool {
    /// A connection pool over `tcp`, with TLS on top and the timeouts around, as kube builds its one;
    /// HTTP/2 where the server speaks it, with PINGs on a silent connection; each new HTTP/2 connection
    /// told to `reconnects`.
    fn sender<C>(&self, tcp: C, reconnects: Option<Arc<IdentityGate>>) -> Sender
    where
        C: Service<Uri> + Clone + Send + Sync + 'static,
        C::Response: Read + Write + Connection + Send + Unpin + 'static,
        C::Future: Send + 'static,
        C::Error: Into<BoxError>,
    {
        let tls = self.tls.over(tcp);
        match reconnects {
            Some(gate) => self.over(Reconnects::new(tls, gate)),
            None => self.over(tls),
        }
    }

    /// The pool over `connector` (TLS included).
    fn over<K>(&self, connector: K) -> Sender
    where
        K: Service<Uri> + Clone + Send + Sync + 'static,
        K::Response: Read + Write + Connection + Send + Unpin + 'static,
        K::Future: Send + 'static,
        K::Error: Into<BoxError>,
    {
        let mut connector = TimeoutConnector::new(connector);
        connector.set_connect_timeout(self.connect);
        connector.set_read_timeout(self.read);
        connector.set_write_timeout(self.write);
        connector.set_reset_reader_on_write(self.reset_reader_on_write);
        let mut builder = hyper_util::client::legacy::Builder::new(TokioExecutor::new());
        builder
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .pool_idle_timeout(IDLE_TIMEOUT)
            .pool_max_idle_per_host(IDLE_PER_HOST)
            .http1_max_buf_size(READ_BUFFER_MAX)
            .http2_keep_alive_interval(SILENCE_BEFORE_PING)
            .http2_keep_alive_timeout(PING_ANSWER_WITHIN)
            .http2_keep_alive_while_idle(true);
        let pool = move |opener, http2_only| {
            let mut builder = builder.clone();
            let client = builder
                .http2_only(http2_only)
                .build::<_, Body>(opener)
                .map_err(BoxError::from);
            BoxCloneSyncService::new(client)
        };
        BoxCloneSyncService::new(Negotiated::new(connector, self.http2, pool))
    }
}

/// The write connection pools of a cluster: one per extra fence (none, or a shard's).
struct Writes {
    /// The client's own fence.
    fence: Fence,
    make: Box<dyn Fn(Gate) -> Sender + Send + Sync>,
    by_fence: Mutex<HashMap<usize, Sender>>,
}

impl Writes {
    fn sender(&self, also: &Fence) -> Sender {
        let mut senders = self.by_fence.lock();
        senders
            .entry(also.key())
            .or_insert_with(|| (self.make)(Gate([self.fence.clone(), also.clone()])))
            .clone()
    }
}

/// Sends reads over the read connections, writes over the fenced ones of their fences once the cluster's
/// identity lets them pass.
#[derive(Clone)]
struct Route {
    reads: Sender,
    writes: Arc<Writes>,
    identity: Arc<IdentityGate>,
}

impl Service<Request<Body>> for Route {
    type Response = Response<Incoming>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Response<Incoming>, BoxError>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxError>> {
        // Each pool is made ready when a request is handed to it (hyper's are always ready).
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        if is_read(request.method()) {
            return Box::pin(self.reads.clone().oneshot(request));
        }
        let also = request
            .extensions()
            .get::<AlsoFencedBy>()
            .map(|a| a.0.clone())
            .unwrap_or_default();
        let (writes, identity) = (self.writes.clone(), self.identity.clone());
        Box::pin(async move {
            // Never to a cluster whose identity is being asked (held: it is asked within a ping's
            // timeout), nor to one it refuses.
            identity
                .passage(IDENTITY_WAIT)
                .await
                .map_err(|why| IdentityRefusal(why.to_string()))?;
            // The fast refusal, after authentication (which may have waited for a token) and the identity:
            // nothing is connected for a write that may not be sent. Its bytes are fenced again at the
            // socket.
            if let Some(refusal) = writes.fence.refusal().or_else(|| also.refusal()) {
                return Err(Fenced(refusal).into());
            }
            writes.sender(&also).oneshot(request).await
        })
    }
}

#[cfg(test)]
mod tests;
