//! The probe server: `/startupz`, `/readyz` and `/livez`, each answering JSON, and `/metrics` (OpenMetrics
//! text of the manager's registry) unless the metrics are served on a port of their own
//! ([`SecureMetrics`](super::SecureMetrics)).
//!
//! The port is unauthenticated and reachable by anything in the cluster network: [`super::connections`]
//! bounds what a client may hold, and `/startupz` and `/readyz` tell a stranger only the verdict and the
//! checks' names and states, as controller-runtime does; the whole report (member names, reasons with
//! servers' answers, identities) only on `?verbose` from a loopback address (`kubectl port-forward`, a
//! shell in the pod). axum routes (GET and HEAD only; other methods get 405, other paths 404).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use tokio::net::TcpListener;

use prometheus_client::registry::Registry;

use super::readiness::Readiness;
use super::report::ClusterReadiness;

/// What the routes read.
struct Served {
    readiness: Arc<Readiness>,
}

/// Serves the probes until the task is aborted, and `/metrics` from `registry` when it is given.
pub(crate) async fn serve(
    listener: TcpListener,
    readiness: Arc<Readiness>,
    registry: Option<Arc<Registry>>,
) {
    super::connections::serve(listener, routes(readiness, registry), None, "probe server").await;
}

/// The probe routes, with `/metrics` when `registry` is given; GET routes answer HEAD too, other
/// methods 405.
fn routes(readiness: Arc<Readiness>, registry: Option<Arc<Registry>>) -> Router {
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
        .with_state(Arc::new(Served { readiness }))
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

/// The peer of a request, as the accept loop records it: `None` when it is not known (never loopback).
type Peer = Option<Extension<ConnectInfo<SocketAddr>>>;

async fn startupz(State(served): State<Arc<Served>>, peer: Peer, uri: Uri) -> Response {
    contexts_answer(&served, detailed(peer, &uri), true)
}

async fn readyz(State(served): State<Arc<Served>>, peer: Peer, uri: Uri) -> Response {
    contexts_answer(&served, detailed(peer, &uri), false)
}

/// Whether a request gets the whole report: it asks (`?verbose`) and comes from this host.
fn detailed(peer: Peer, uri: &Uri) -> bool {
    let asks = (uri.query().unwrap_or_default().split('&'))
        .any(|pair| pair == "verbose" || pair.starts_with("verbose="));
    asks && peer.is_some_and(|Extension(ConnectInfo(peer))| is_local(peer))
}

/// Whether `peer` is on this host (this pod's network namespace): an IPv4 or IPv6 loopback address, also
/// written as an IPv4-mapped IPv6 one (a server bound on `[::]`).
fn is_local(peer: SocketAddr) -> bool {
    peer.ip().to_canonical().is_loopback()
}

/// The whole report when `detailed`; else the verdict, each fixed context's state (the code's names), and
/// how many members are not ready: members are counted, never named, and no reason is given, since a
/// reason names members, Secrets, paths and identities and quotes the servers' answers.
fn contexts_answer(served: &Served, detailed: bool, startup: bool) -> Response {
    let report = served.readiness.report();
    let passing = if startup {
        report.started
    } else {
        report.ready
    };
    let status = if passing { "ok" } else { "failing" };
    let mut body = serde_json::json!({
        "status": status,
        "started": report.started,
        "ready": report.ready,
    });
    if !detailed {
        let (checks, members) = checks(&report, &served.readiness.fixed_contexts());
        body["checks"] = serde_json::json!(checks);
        if let Some(members) = members {
            body["members"] = members;
        }
        return json(passing, &body);
    }
    body["clusters"] = serde_json::json!(report.clusters);
    if let Some(sharding) = &report.sharding {
        body["sharding"] = serde_json::json!(sharding);
    }
    if let Some(leadership) = &report.leadership {
        body["leadership"] = serde_json::json!(leadership);
    }
    json(passing, &body)
}

/// Each of the `fixed` contexts' state (`ok`, `starting`, `failing`), and, when there are other clusters
/// (the fleet's members), how many there are and how many of them are not ready.
fn checks(
    report: &crate::readiness::ReadinessReport,
    fixed: &BTreeSet<String>,
) -> (BTreeMap<String, &'static str>, Option<serde_json::Value>) {
    let mut checks = BTreeMap::new();
    let (mut members, mut not_ready) = (0, 0);
    for (name, context) in &report.clusters {
        if !fixed.contains(name) {
            members += 1;
            not_ready += usize::from(context.status != ClusterReadiness::Ready);
            continue;
        }
        let state = match context.status {
            ClusterReadiness::Ready => "ok",
            ClusterReadiness::Starting => "starting",
            ClusterReadiness::Failing => "failing",
        };
        checks.insert(name.clone(), state);
    }
    let members =
        (members > 0).then(|| serde_json::json!({ "count": members, "not_ready": not_ready }));
    (checks, members)
}

/// Liveness asks whether this process works, not whether remote clusters do: restarting the operator
/// cannot fix a cluster that is down. It fails only when a controller's loop has ended.
async fn livez(State(served): State<Arc<Served>>) -> Response {
    let dead = served.readiness.liveness_problems();
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
        let readiness = Arc::new(Readiness::default());
        let request = axum::http::Request::builder()
            .method(method)
            .uri(path)
            .body(axum::body::Body::empty())
            .unwrap();
        answer(routes(readiness, registry), request).await
    }

    async fn answer(
        router: Router,
        request: axum::http::Request<axum::body::Body>,
    ) -> (StatusCode, String) {
        let response = router.oneshot(request).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    /// `GET path` from `peer` (as the accept loop records it) on the probes of `readiness`.
    async fn get_from(
        readiness: &Arc<Readiness>,
        peer: &str,
        path: &str,
    ) -> (StatusCode, serde_json::Value) {
        let mut request = axum::http::Request::get(path)
            .body(axum::body::Body::empty())
            .unwrap();
        let peer: SocketAddr = peer.parse().unwrap();
        request.extensions_mut().insert(ConnectInfo(peer));
        let (status, body) = answer(routes(readiness.clone(), None), request).await;
        (status, serde_json::from_str(&body).unwrap())
    }

    /// A manager's readiness with a fixed context `control`, ready, and two members, one ready and one whose
    /// Secret is refused with a reason naming it, its kubeconfig's path and a long answer of its server.
    fn fleet_readiness() -> Arc<Readiness> {
        let readiness = Arc::new(Readiness::default());
        readiness.declare_fixed("control", true);
        readiness.connected("control", None);
        for member in ["member-ok", "member-secret-x"] {
            readiness.declare(member, false);
            readiness.member_phase(member, Some(super::super::Phase::Joining));
        }
        readiness.connected("member-ok", None);
        let reason = format!(
            "Secret fleet/member-secret-x: /var/run/kubeconfigs/x: server said {}",
            "é".repeat(4000)
        );
        let error = crate::core::Error::Member {
            member: "member-secret-x".into(),
            reason,
        };
        readiness.connected("member-secret-x", Some(&error));
        readiness.arm();
        readiness
    }

    #[test]
    fn only_loopback_peers_are_local() {
        for local in [
            "127.0.0.1:1",
            "127.0.0.2:80",
            "[::1]:8080",
            "[::ffff:127.0.0.1]:9",
        ] {
            assert!(is_local(local.parse().unwrap()), "{local}");
        }
        for remote in [
            "10.0.0.7:1",
            "192.168.1.1:80",
            "0.0.0.0:1",
            "[::]:1",
            "[fe80::1]:1",
            "[::ffff:10.0.0.1]:9",
        ] {
            assert!(!is_local(remote.parse().unwrap()), "{remote}");
        }
    }

    #[tokio::test]
    async fn a_stranger_reads_no_member_name_and_no_reason() {
        let readiness = fleet_readiness();
        for path in [
            "/readyz",
            "/readyz?verbose",
            "/startupz?verbose=true",
            "/startupz",
        ] {
            let (status, body) = get_from(&readiness, "10.1.2.3:41000", path).await;
            assert_eq!(status, StatusCode::OK, "{path}: members are not required");
            let text = body.to_string();
            for secret in ["member-", "Secret", "/var/run", "server said", "reasons"] {
                assert!(!text.contains(secret), "{path} shows {secret:?}: {text}");
            }
            assert_eq!(
                body["checks"],
                serde_json::json!({ "control": "ok" }),
                "{path}"
            );
            assert_eq!(
                body["members"],
                serde_json::json!({ "count": 2, "not_ready": 1 }),
                "{path}"
            );
        }
        // Without a known peer (never local) it is the same.
        let (_, body) = call_serving(None, "GET", "/readyz?verbose").await;
        assert!(body.contains("\"checks\""), "{body}");
    }

    #[tokio::test]
    async fn the_local_host_reads_the_detail_on_verbose_with_reasons_cut() {
        let readiness = fleet_readiness();
        let (_, terse) = get_from(&readiness, "127.0.0.1:41000", "/readyz").await;
        assert!(terse.get("clusters").is_none(), "{terse}");
        for path in ["/readyz?verbose", "/startupz?x=1&verbose"] {
            let (_, body) = get_from(&readiness, "[::1]:41000", path).await;
            let reasons = &body["clusters"]["member-secret-x"]["reasons"];
            let reason = reasons[0].as_str().unwrap();
            assert!(
                reason.contains("Secret fleet/member-secret-x"),
                "{path}: {reason}"
            );
            assert!(
                reason.len() <= super::super::report::MAX_REASON,
                "{}",
                reason.len()
            );
            assert!(reason.ends_with(" [cut]"), "{reason}");
            assert_eq!(body["clusters"]["member-ok"]["status"], "ready", "{path}");
        }
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
        let readiness = Arc::new(Readiness::default());
        readiness.controller_ended("app-deployer", "its loop panicked".into());
        let request = axum::http::Request::get("/livez")
            .body(axum::body::Body::empty())
            .unwrap();
        let response = routes(readiness, Some(Arc::default()))
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

    #[tokio::test]
    async fn the_accept_loop_tells_the_routes_the_peer() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let server = tokio::spawn(serve(listener, fleet_readiness(), None));
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let request = "GET /readyz?verbose HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        let read = stream.read_to_string(&mut response);
        tokio::time::timeout(std::time::Duration::from_secs(10), read)
            .await
            .expect("an answer within 10 s")
            .unwrap();
        server.abort();
        assert!(response.contains("member-secret-x"), "{response}");
    }
}
