//! The probe server: `/startupz`, `/readyz` and `/livez`, each answering JSON, and `/metrics` (OpenMetrics
//! text of the manager's registry).
//!
//! The port is unauthenticated and reachable by anything in the cluster network, so the server defends
//! itself: at most [`MAX_CONNECTIONS`] at once (a new one closes the oldest that never sent a request),
//! headers must arrive within [`HEADER_TIMEOUT`] and stay under [`MAX_HEADER_BYTES`], a connection lives at
//! most [`CONNECTION_TIMEOUT`], and a failing `accept` (e.g. out of file descriptors) frees a descriptor or
//! backs off instead of spinning. axum routes (GET and HEAD only; other methods get 405, other paths 404);
//! hyper serves each connection with the limits.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::task::AbortHandle;

use prometheus_client::registry::Registry;

use super::health::Health;

/// What the routes read.
struct Served {
    health: Arc<Health>,
    registry: Arc<Registry>,
}

/// The most connections served at once; kubelet needs one per probe.
pub(super) const MAX_CONNECTIONS: usize = 64;
/// How long a client may take to send its request headers.
pub(super) const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest a connection lives, however busy.
pub(super) const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest request head accepted.
pub(super) const MAX_HEADER_BYTES: usize = 16 * 1024;

/// Serves the probes until the task is aborted.
pub(crate) async fn serve(listener: TcpListener, health: Arc<Health>, registry: Arc<Registry>) {
    let router = routes(health, registry);
    let mut open = Connections::default();
    let mut backoff = Duration::ZERO;
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => {
                backoff = Duration::ZERO;
                stream
            }
            Err(error) => {
                // Out of file descriptors (or another resource): free one by closing the oldest idle
                // connection, else wait; retrying at once would only fail again, at 100 % CPU.
                if open.evict_one() {
                    continue;
                }
                backoff = (backoff * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
                if backoff == Duration::from_millis(10) {
                    tracing::warn!(%error, "probe server: accept failed; backing off");
                }
                tokio::time::sleep(backoff).await;
                continue;
            }
        };
        if open.len() >= MAX_CONNECTIONS {
            open.evict_one();
        }
        let served = Arc::new(AtomicBool::new(false));
        let service = {
            let (router, served) = (router.clone(), served.clone());
            hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                served.store(true, Ordering::Relaxed);
                tower::ServiceExt::oneshot(router.clone(), request)
            })
        };
        let task = tokio::spawn(async move {
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(MAX_HEADER_BYTES)
                .serve_connection(TokioIo::new(stream), service);
            match tokio::time::timeout(CONNECTION_TIMEOUT, connection).await {
                Ok(Err(error)) => tracing::debug!(%error, "probe connection ended with an error"),
                Err(_) => tracing::debug!("probe connection closed after {CONNECTION_TIMEOUT:?}"),
                Ok(Ok(())) => {}
            }
        });
        open.add(served, task.abort_handle());
    }
}

/// The connections being served, oldest first.
#[derive(Default)]
struct Connections {
    open: VecDeque<(Arc<AtomicBool>, AbortHandle)>,
    evicted: u64,
}

impl Connections {
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
                "probe server: too many connections; closing the oldest idle ones"
            );
        }
        self.evicted += 1;
        true
    }
}

/// The probe routes; GET routes answer HEAD too, other methods 405.
fn routes(health: Arc<Health>, registry: Arc<Registry>) -> Router {
    Router::new()
        .route("/startupz", get(startupz))
        .route("/readyz", get(readyz))
        .route("/livez", get(livez))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .with_state(Arc::new(Served { health, registry }))
}

/// The content type of OpenMetrics text, which Prometheus asks for and parses.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

async fn metrics(State(served): State<Arc<Served>>) -> Response {
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, &served.registry) {
        Ok(()) => (StatusCode::OK, [("content-type", OPENMETRICS)], text).into_response(),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "encoding the metrics failed",
        )
            .into_response(),
    }
}

async fn startupz(State(served): State<Arc<Served>>) -> Response {
    let report = served.health.report();
    contexts_answer(report.started, &report)
}

async fn readyz(State(served): State<Arc<Served>>) -> Response {
    let report = served.health.report();
    contexts_answer(report.ready, &report)
}

/// The report names contexts, kinds and the kind of each problem, never credentials.
fn contexts_answer(passing: bool, report: &crate::HealthReport) -> Response {
    let mut body = serde_json::json!({
        "status": if passing { "ok" } else { "failing" },
        "started": report.started,
        "ready": report.ready,
        "contexts": report.contexts,
    });
    if let Some(sharding) = &report.sharding {
        body["sharding"] = serde_json::json!(sharding);
    }
    if let Some(leadership) = &report.leadership {
        body["leadership"] = serde_json::json!(leadership);
    }
    json(passing, &body)
}

/// Liveness asks whether this process works, not whether remote clusters do: restarting the operator
/// cannot fix a cluster that is down. It fails only when a controller's loop has ended.
async fn livez(State(served): State<Arc<Served>>) -> Response {
    let dead = served.health.liveness_problems();
    let body = if dead.is_empty() {
        serde_json::json!({ "status": "ok" })
    } else {
        serde_json::json!({ "status": "failing", "controllers": dead })
    };
    json(dead.is_empty(), &body)
}

async fn not_found() -> Response {
    let body = serde_json::json!({ "error": "not found; the paths are /startupz, /readyz, /livez and /metrics" });
    (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
}

fn json(passing: bool, body: &serde_json::Value) -> Response {
    let status = if passing {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let bytes = serde_json::to_vec_pretty(body).expect("JSON values serialize");
    (status, [("content-type", "application/json")], bytes).into_response()
}

#[cfg(test)]
mod tests {
    use tower::ServiceExt;

    use super::*;

    async fn call(method: &str, path: &str) -> (StatusCode, String) {
        let health = Arc::new(Health::default());
        let request = axum::http::Request::builder()
            .method(method)
            .uri(path)
            .body(axum::body::Body::empty())
            .unwrap();
        let response = routes(health, Arc::default())
            .oneshot(request)
            .await
            .unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn only_get_and_head_on_the_probe_paths() {
        assert_eq!(call("GET", "/livez").await.0, StatusCode::OK);
        assert_eq!(
            call("HEAD", "/readyz").await.0,
            StatusCode::OK,
            "no required context: ready"
        );
        assert_eq!(
            call("POST", "/readyz").await.0,
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(
            call("DELETE", "/livez").await.0,
            StatusCode::METHOD_NOT_ALLOWED
        );
        let (status, body) = call("GET", "/metrics").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "# EOF\n"));
        let (status, body) = call("GET", "/metrics.php").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(
            body.contains("the paths are /startupz, /readyz, /livez and /metrics"),
            "{body}"
        );
    }

    #[tokio::test]
    async fn a_dead_controller_fails_livez_by_name() {
        let health = Arc::new(Health::default());
        health.controller_ended("app-deployer", "its loop panicked".into());
        let request = axum::http::Request::get("/livez")
            .body(axum::body::Body::empty())
            .unwrap();
        let response = routes(health, Arc::default())
            .oneshot(request)
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["controllers"]["app-deployer"], "its loop panicked");
    }
}
