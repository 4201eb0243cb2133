use parking_lot::Mutex;
use std::convert::Infallible;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, WatchParams};
use tokio::time::Instant;

use super::*;

/// A tiny API server on a local port: answers every request with a `Status`, and records `METHOD uri` of
/// each request it received whole (its body read to the end).
async fn server() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorded = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let recorded = recorded.clone();
            let serve = hyper::service::service_fn(move |request: Request<Incoming>| {
                let recorded = recorded.clone();
                async move {
                    let (uri, query) = (request.uri(), request.uri().query().unwrap_or_default());
                    let query = if query.is_empty() {
                        String::new()
                    } else {
                        format!("?{query}")
                    };
                    let line = format!("{} {}{query}", request.method(), uri.path());
                    if request.into_body().collect().await.is_ok() {
                        recorded.lock().push(line);
                    }
                    let status = r#"{"kind":"Status","apiVersion":"v1","status":"Success"}"#;
                    let response = Response::builder()
                        .header("content-type", "application/json")
                        .body(Full::new(Bytes::from(status)))
                        .unwrap();
                    Ok::<_, Infallible>(response)
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), serve),
            );
        }
    });
    (url, seen)
}

/// Plain TCP connections that take `delay` to open (a connection checkout, a TLS handshake or a stopped
/// process, as the fence sees them).
fn slow_tcp(
    delay: Duration,
) -> impl Service<
    Uri,
    Response = TokioIo<tokio::net::TcpStream>,
    Error = BoxError,
    Future = BoxFuture<'static, Result<TokioIo<tokio::net::TcpStream>, BoxError>>,
> + Clone
+ Send
+ Sync
+ 'static {
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tower::service_fn(move |uri: Uri| {
        let mut tcp = tcp.clone();
        let connecting: BoxFuture<'static, _> = Box::pin(async move {
            tokio::time::sleep(delay).await;
            tcp.call(uri).await.map_err(BoxError::from)
        });
        connecting
    })
}

fn config(url: &str) -> kube::Config {
    kube::Config::new(url.parse().unwrap())
}

async fn access(url: &str) -> Access {
    Access::of("cluster-a", config(url), Duration::from_secs(30))
        .await
        .unwrap()
}

/// Polls the server's record until `done` holds, for at most 10 s.
async fn seen_until(seen: &Mutex<Vec<String>>, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = seen.lock().clone();
        if done(&now) || Instant::now() >= deadline {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn writes_are_sent_while_the_fence_is_open() {
    let (url, seen) = server().await;
    let fence = Fence::closed();
    fence.open_for(Instant::now(), Duration::from_secs(60));
    let client = client(&access(&url).await, &fence).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "apps");
    tokio::time::timeout(
        Duration::from_secs(10),
        api.delete("web", &DeleteParams::default()),
    )
    .await
    .expect("an answer within 10 s")
    .unwrap();
    assert_eq!(
        seen.lock().clone(),
        ["DELETE /api/v1/namespaces/apps/configmaps/web"]
    );
}

#[tokio::test]
async fn a_write_held_past_the_deadline_is_never_received_and_reads_still_are() {
    let (url, seen) = server().await;
    let fence = Fence::closed();
    // Open when the write enters the client; closed by the time its connection is up.
    fence.open_for(Instant::now(), Duration::from_millis(300));
    let client = client_over(
        &access(&url).await,
        &fence,
        slow_tcp(Duration::from_millis(600)),
    )
    .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "apps");

    let refused = tokio::time::timeout(
        Duration::from_secs(10),
        api.delete("web", &DeleteParams::default()),
    )
    .await
    .expect("an answer within 10 s")
    .unwrap_err();
    assert!(
        crate::core::fenced(&refused).is_some_and(|r| r.starts_with("not the leader")),
        "refused by the fence at the socket: {}",
        chain(&refused)
    );

    // A read and a watch still go out (over their own connections), however closed the fence is.
    let read = tokio::time::timeout(Duration::from_secs(10), api.get_opt("web")).await;
    assert!(read.is_ok(), "the read was answered");
    let watch = tokio::time::timeout(
        Duration::from_secs(10),
        api.watch(&WatchParams::default().timeout(1), "0"),
    )
    .await;
    assert!(watch.is_ok(), "the watch was answered");
    let received = seen_until(&seen, |s| s.len() >= 2).await;
    assert!(
        received.iter().all(|r| r.starts_with("GET ")),
        "the held write never reached the server: {received:?}"
    );
    assert!(
        received.iter().any(|r| r.contains("watch=true")),
        "the watch reached it: {received:?}"
    );
}

#[tokio::test]
async fn a_shards_write_passes_its_shards_fence_at_the_socket() {
    let (url, seen) = server().await;
    let (fence, shard) = (
        Fence::closed(),
        Fence::closed_saying(crate::client::NOT_THE_SHARD_OWNER),
    );
    fence.open_for(Instant::now(), Duration::from_secs(60));
    shard.open_for(Instant::now(), Duration::from_millis(300));
    let base = client_over(
        &access(&url).await,
        &fence,
        slow_tcp(Duration::from_millis(600)),
    )
    .unwrap();
    let send = tower::service_fn(move |mut request: Request<Body>| {
        let base = base.clone();
        request.extensions_mut().insert(AlsoFencedBy(shard.clone()));
        async move { base.send(request).await }
    });
    let api: Api<ConfigMap> = Api::namespaced(Client::new(send, "apps"), "apps");
    let refused = tokio::time::timeout(
        Duration::from_secs(10),
        api.delete("web", &DeleteParams::default()),
    )
    .await
    .expect("an answer within 10 s")
    .unwrap_err();
    assert_eq!(
        crate::core::fenced(&refused),
        Some(crate::client::NOT_THE_SHARD_OWNER),
        "{}",
        chain(&refused)
    );
    let _ = tokio::time::timeout(Duration::from_secs(10), api.get_opt("web")).await;
    let received = seen_until(&seen, |s| !s.is_empty()).await;
    assert_eq!(received, ["GET /api/v1/namespaces/apps/configmaps/web"]);
}

#[tokio::test]
async fn a_proxy_is_refused_in_words_without_its_user_and_password() {
    let mut config = config("https://127.0.0.1:6443");
    config.proxy_url = Some("http://proxy-user:pr0xy-s3cret@proxy:3128".parse().unwrap());
    let access = Access::of("cluster-a", config, Duration::from_secs(30))
        .await
        .unwrap();
    let error = client(&access, &Fence::default()).err().expect("refused");
    assert!(
        error.contains("a proxy is configured (http://proxy:3128: "),
        "{error}"
    );
    assert!(
        !error.contains("pr0xy-s3cret") && !error.contains("proxy-user"),
        "{error}"
    );
}

mod idle;
mod multiplexed;

#[tokio::test]
async fn every_client_of_a_context_stamps_its_servers_last_answer() {
    let (url, _) = server().await;
    let access = access(&url).await;
    assert_eq!(access.last_answer(), None);
    async fn within<T>(request: impl Future<Output = T>) -> T {
        tokio::time::timeout(Duration::from_secs(10), request)
            .await
            .expect("an answer within 10 s")
    }
    // The controllers' client, a read.
    let api: Api<ConfigMap> = Api::namespaced(client(&access, &Fence::default()).unwrap(), "apps");
    let before = Instant::now();
    within(api.delete("web", &DeleteParams::default()))
        .await
        .unwrap();
    let first = access.last_answer().expect("the delete's answer stamped");
    assert!(first >= before);
    // A client of its own (a ping's), on a clone of the access; its answer (a `Status`, not a version)
    // is an answer all the same.
    tokio::time::sleep(Duration::from_millis(10)).await;
    let own = own_client(&access.clone()).unwrap();
    let _ = within(own.apiserver_version()).await;
    assert!(access.last_answer() > Some(first));
}

#[tokio::test]
async fn connections_send_small_frames_at_once_not_after_nagles_wait() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri: Uri = format!("http://{}", listener.local_addr().unwrap())
        .parse()
        .unwrap();
    let connected = tcp().call(uri).await.unwrap();
    assert!(connected.inner().nodelay().unwrap(), "TCP_NODELAY set");
}
