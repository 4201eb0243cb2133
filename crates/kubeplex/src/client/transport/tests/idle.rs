//! Idle connections: a burst of requests leaves at most [`IDLE_PER_HOST`] of its connections open.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use tokio::time::Instant;

use super::super::*;
use super::access;

/// A local server whose answers take `delay`; counts the connections open to it now and at most.
async fn counting_server(delay: Duration) -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (open, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (now, peak) = (open.clone(), most.clone());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let at = now.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(at, Ordering::SeqCst);
            let serve = hyper::service::service_fn(move |_: Request<Incoming>| async move {
                tokio::time::sleep(delay).await;
                let status = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","message":"not found","code":404}"#;
                let response = Response::builder()
                    .status(404)
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(status)))
                    .unwrap();
                Ok::<_, Infallible>(response)
            });
            let closed = now.clone();
            tokio::spawn(async move {
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), serve);
                let _ = connection.await;
                closed.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    (url, open, most)
}

#[tokio::test]
async fn a_burst_of_requests_leaves_at_most_the_idle_limit_of_connections_open() {
    let burst = IDLE_PER_HOST + 16;
    let (url, open, most) = counting_server(Duration::from_millis(300)).await;
    let client = client(&access(&url).await, &Fence::default()).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "apps");
    let reads = (0..burst).map(|i| {
        let api = api.clone();
        async move { api.get_opt(&format!("web-{i}")).await }
    });
    let answered = tokio::time::timeout(Duration::from_secs(10), futures::future::join_all(reads))
        .await
        .expect("every read answered within 10 s");
    assert!(answered.iter().all(|r| matches!(r, Ok(None))));
    assert_eq!(
        most.load(Ordering::SeqCst),
        burst,
        "a connection per request in flight"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while open.load(Ordering::SeqCst) > IDLE_PER_HOST {
        assert!(
            Instant::now() < deadline,
            "{} connections still open 10 s after the burst; at most {IDLE_PER_HOST} are kept",
            open.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The kept ones serve the next requests: no new connection.
    let again = tokio::time::timeout(Duration::from_secs(10), api.get_opt("web")).await;
    assert!(matches!(again, Ok(Ok(None))));
    assert_eq!(open.load(Ordering::SeqCst), IDLE_PER_HOST);
    drop((api, client));
}
