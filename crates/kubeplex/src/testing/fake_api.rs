//! A stand-in API server for unit tests: a `kube::Client` whose requests are answered by a function and
//! recorded, so the request paths are tested without a cluster.

use std::convert::Infallible;
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use kube::Client;
use parking_lot::Mutex;

/// One request as the fake server saw it.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub(crate) method: String,
    /// Path and query.
    pub(crate) uri: String,
    pub(crate) body: String,
}

/// The requests a fake client sent, in order.
#[derive(Clone, Default)]
pub(crate) struct Requests(Arc<Mutex<Vec<Seen>>>);

impl Requests {
    pub(crate) fn all(&self) -> Vec<Seen> {
        self.0.lock().clone()
    }

    /// The requests with this method, as `METHOD uri` lines.
    pub(crate) fn lines(&self) -> Vec<String> {
        self.all()
            .iter()
            .map(|s| format!("{} {}", s.method, s.uri))
            .collect()
    }
}

/// A client answered by `respond(method, uri, body) -> (status code, JSON body)`.
pub(crate) fn client(
    respond: impl Fn(&str, &str, &str) -> (u16, serde_json::Value) + Send + Sync + 'static,
) -> (Client, Requests) {
    let requests = Requests::default();
    let recorded = requests.clone();
    let client = answered_by(move |seen: Seen| {
        let answer = respond(&seen.method, &seen.uri, &seen.body);
        recorded.0.lock().push(seen);
        std::future::ready(answer)
    });
    (client, requests)
}

/// A client whose requests are answered by `answer`, which may take its time or never answer: a request
/// whose caller gives up (a timeout) is dropped with its answer, as one on a link that went silent.
pub(crate) fn answered_by<F>(answer: impl Fn(Seen) -> F + Send + Sync + 'static) -> Client
where
    F: Future<Output = (u16, serde_json::Value)> + Send + 'static,
{
    answered_in("default", answer)
}

/// A client answering every request with `200 {}` whose configuration defaults to `namespace`.
pub(crate) fn client_in(namespace: &str) -> Client {
    answered_in(namespace, |_| {
        std::future::ready((200, serde_json::json!({})))
    })
}

/// As [`answered_by`], the client's configuration defaulting to `namespace`.
fn answered_in<F>(namespace: &str, answer: impl Fn(Seen) -> F + Send + Sync + 'static) -> Client
where
    F: Future<Output = (u16, serde_json::Value)> + Send + 'static,
{
    let answer = Arc::new(answer);
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let answer = answer.clone();
        async move {
            let method = request.method().to_string();
            let uri = request
                .uri()
                .path_and_query()
                .map(ToString::to_string)
                .unwrap_or_default();
            let body = request.into_body().collect().await.map(|b| b.to_bytes());
            let body = String::from_utf8_lossy(&body.unwrap_or_default()).into_owned();
            let (code, answer) = answer(Seen { method, uri, body }).await;
            let response = http::Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(answer.to_string())))
                .unwrap();
            Ok::<_, Infallible>(response)
        }
    });
    Client::new(service, namespace)
}

/// A `Status` body as the API server sends with an error code.
pub(crate) fn status(code: u16, reason: &str, message: &str) -> (u16, serde_json::Value) {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure",
        "code": code, "reason": reason, "message": message,
    });
    (code, body)
}
