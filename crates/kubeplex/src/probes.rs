//! The probe server: `/startupz`, `/readyz` and `/livez`, each answering JSON.

use std::convert::Infallible;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::health::Health;

/// Serves the probes until the task is aborted.
pub(crate) async fn serve(listener: TcpListener, health: Arc<Health>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::warn!(%error, "probe server: accept failed");
                continue;
            }
        };
        let health = health.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                let response = respond(&health, request.uri().path());
                async move { Ok::<_, Infallible>(response) }
            });
            if let Err(error) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%error, "probe connection ended with an error");
            }
        });
    }
}

/// The answer to one probe. The report names contexts, kinds and reasons, never credentials.
fn respond(health: &Health, path: &str) -> Response<Full<Bytes>> {
    let (passing, body) = match path {
        "/startupz" | "/readyz" => {
            let report = health.report();
            let passing = if path == "/startupz" {
                report.started
            } else {
                report.ready
            };
            let body = serde_json::json!({
                "status": if passing { "ok" } else { "failing" },
                "started": report.started,
                "ready": report.ready,
                "contexts": report.contexts,
            });
            (passing, body)
        }
        // Liveness asks whether this process works, not whether remote clusters do: restarting the operator
        // cannot fix a cluster that is down. It fails only when a controller's loop has ended.
        "/livez" => {
            let dead = health.liveness_problems();
            let body = if dead.is_empty() {
                serde_json::json!({ "status": "ok" })
            } else {
                serde_json::json!({ "status": "failing", "controllers": dead })
            };
            (dead.is_empty(), body)
        }
        _ => {
            let body = serde_json::json!({ "error": "not found; the probes are /startupz, /readyz and /livez" });
            return json(StatusCode::NOT_FOUND, &body);
        }
    };
    let status = if passing {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    json(status, &body)
}

fn json(status: StatusCode, body: &serde_json::Value) -> Response<Full<Bytes>> {
    let bytes = serde_json::to_vec_pretty(body).expect("JSON values serialize");
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(bytes)))
        .expect("a response with a valid status and header")
}
