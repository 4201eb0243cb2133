//! The probe server: `/startupz`, `/readyz` and `/livez`, each answering JSON, and `/metrics` (OpenMetrics
//! text of the manager's registry) unless the metrics are served on a port of their own
//! ([`SecureMetrics`](super::SecureMetrics)).
//!
//! The port is unauthenticated and reachable by anything in the cluster network: [`super::connections`]
//! bounds what a client may hold. axum routes (GET and HEAD only; other methods get 405, other paths 404).

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;

use prometheus_client::registry::Registry;

use super::health::Health;

/// What the routes read.
struct Served {
    health: Arc<Health>,
}

/// Serves the probes until the task is aborted, and `/metrics` from `registry` when it is given.
pub(crate) async fn serve(
    listener: TcpListener,
    health: Arc<Health>,
    registry: Option<Arc<Registry>>,
) {
    super::connections::serve(listener, routes(health, registry), None, "probe server").await;
}

/// The probe routes, with `/metrics` when `registry` is given; GET routes answer HEAD too, other
/// methods 405.
fn routes(health: Arc<Health>, registry: Option<Arc<Registry>>) -> Router {
    let mut router = Router::new()
        .route("/startupz", get(startupz))
        .route("/readyz", get(readyz))
        .route("/livez", get(livez));
    let paths = match registry {
        Some(registry) => {
            let metrics = get(move || std::future::ready(metrics_answer(&registry)));
            router = router.route("/metrics", metrics);
            "/startupz, /readyz, /livez and /metrics"
        }
        None => "/startupz, /readyz and /livez",
    };
    let not_found = move || {
        let body = serde_json::json!({ "error": format!("not found; the paths are {paths}") });
        std::future::ready((StatusCode::NOT_FOUND, axum::Json(body)).into_response())
    };
    router
        .fallback(not_found)
        .with_state(Arc::new(Served { health }))
}

/// The content type of OpenMetrics text, which Prometheus asks for and parses.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The answer to a scrape: `registry` as OpenMetrics text.
pub(super) fn metrics_answer(registry: &Registry) -> Response {
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, registry) {
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
        call_serving(Some(Arc::default()), method, path).await
    }

    async fn call_serving(
        registry: Option<Arc<Registry>>,
        method: &str,
        path: &str,
    ) -> (StatusCode, String) {
        let health = Arc::new(Health::default());
        let request = axum::http::Request::builder()
            .method(method)
            .uri(path)
            .body(axum::body::Body::empty())
            .unwrap();
        let response = routes(health, registry).oneshot(request).await.unwrap();
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
    async fn no_metrics_when_they_are_served_elsewhere() {
        let (status, body) = call_serving(None, "GET", "/metrics").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(
            body.contains("the paths are /startupz, /readyz and /livez"),
            "{body}"
        );
        assert_eq!(call_serving(None, "GET", "/readyz").await.0, StatusCode::OK);
    }

    #[tokio::test]
    async fn a_dead_controller_fails_livez_by_name() {
        let health = Arc::new(Health::default());
        health.controller_ended("app-deployer", "its loop panicked".into());
        let request = axum::http::Request::get("/livez")
            .body(axum::body::Body::empty())
            .unwrap();
        let response = routes(health, Some(Arc::default()))
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
