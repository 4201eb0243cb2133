//! Admission under the fleet's load: the kubeplex operator serves a validating webhook for the parents
//! (checking each against the fleet, as the example's does), and the parent sends it AdmissionReviews over
//! one kept-alive HTTPS connection while the operator converges, timing each answer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use kube::core::admission::AdmissionRequest;
use kubeplex::ContextName;
use kubeplex::webhook::{FleetView, Validate, Webhooks, validating_path};
use rustls::pki_types::pem::PemObject;
use tokio::sync::watch;

use super::app::{CONTROL, FleetApp, PARENT_NAMESPACE};

/// The webhook the operator serves: a parent is refused if a child namespace is not a DNS label, or a
/// child context is not a cluster of the fleet; it also counts the parents in the operator's cache, as a
/// check against the fleet's state would.
pub(super) struct ParentCheck {
    pub(super) contexts: Vec<String>,
}

impl Validate for ParentCheck {
    type Context = ContextName;
    type Kind = FleetApp;

    async fn validate(
        &self,
        request: &AdmissionRequest<FleetApp>,
        fleet: &FleetView<ContextName>,
    ) -> Result<(), String> {
        let Some(app) = &request.object else {
            return Ok(());
        };
        let label = |n: &String| !n.is_empty() && n.len() <= 63;
        if let Some(bad) = app.spec.namespaces.iter().find(|n| !label(n)) {
            return Err(format!("namespace {bad:?} is not a DNS label"));
        }
        if let Some(missing) = self.contexts.iter().find(|c| !fleet.has_cluster(c)) {
            return Err(format!("the fleet has no cluster {missing}"));
        }
        let cached = fleet
            .cached::<FleetApp>(ContextName::new(CONTROL))
            .map_err(|e| e.to_string())?;
        std::hint::black_box(cached.len());
        Ok(())
    }
}

/// The webhooks of the measured operator: [`ParentCheck`] on a loopback port, signed by itself.
pub(super) fn webhooks(contexts: Vec<String>) -> Webhooks {
    Webhooks::new("127.0.0.1:0").validate(ParentCheck { contexts })
}

/// A CREATE of a parent, as the API server sends it.
fn review() -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "bench", "kind": { "group": "bench.kubeplex.dev", "version": "v1", "kind": "FleetApp" },
            "resource": { "group": "bench.kubeplex.dev", "version": "v1", "resource": "fleetapps" },
            "name": "probe", "namespace": PARENT_NAMESPACE, "operation": "CREATE",
            "userInfo": { "username": "bench" },
            "object": { "apiVersion": "bench.kubeplex.dev/v1", "kind": "FleetApp",
                "metadata": { "name": "probe", "namespace": PARENT_NAMESPACE },
                "spec": { "image": "registry.example/app:probe", "replicas": 1,
                    "namespaces": ["fleet-0", "fleet-1"] } } } }))
    .expect("a review")
}

/// Sends reviews to the webhook at `address` (its certificate `ca`, PEM) one after another, every
/// `every`, until `stop` turns true; each answer's time in milliseconds.
pub(super) async fn load(
    address: String,
    ca: String,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) -> Result<Vec<f64>, String> {
    let mut roots = rustls::RootCertStore::empty();
    let cert = rustls::pki_types::CertificateDer::from_pem_slice(ca.as_bytes())
        .map_err(|e| format!("the webhook's certificate: {e}"))?;
    roots.add(cert).map_err(|e| e.to_string())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(&address)
        .await
        .map_err(|e| e.to_string())?;
    let name = rustls::pki_types::ServerName::try_from("localhost").map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS to the webhook: {e}"))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let (body, path) = (Bytes::from(review()), validating_path::<FleetApp>());
    let mut times = Vec::new();
    let mut ticks = tokio::time::interval(every);
    while !*stop.borrow() {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stop.changed() => break,
        }
        let request = http::Request::post(&path)
            .header(http::header::HOST, "localhost")
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(body.clone()))
            .map_err(|e| e.to_string())?;
        let sent = Instant::now();
        let answer = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let status = answer.status();
        let answer = answer
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        times.push(sent.elapsed().as_secs_f64() * 1000.0);
        let review: serde_json::Value =
            serde_json::from_slice(&answer).map_err(|e| e.to_string())?;
        if status != http::StatusCode::OK || review["response"]["allowed"] != true {
            return Err(format!("the webhook answered {status}: {review}"));
        }
    }
    Ok(times)
}

/// From the operator's `/metrics`: its webhook's answers timed at the server (from the request read to the
/// answer written) — how many, and how many within 5 ms.
pub(super) fn served_within_5ms(metrics: &str) -> (f64, f64) {
    let path = validating_path::<FleetApp>();
    let series = |name: &str, le: Option<&str>| {
        let labels = match le {
            // prometheus-client writes `le` before the family's labels.
            Some(le) => format!("{{le=\"{le}\",webhook=\"{path}\"}}"),
            None => format!("{{webhook=\"{path}\"}}"),
        };
        let line = format!("{name}{labels} ");
        (metrics.lines())
            .find_map(|l| l.strip_prefix(&line))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let bucket = "controller_runtime_webhook_latency_seconds_bucket";
    let count = series("controller_runtime_webhook_latency_seconds_count", None);
    (count, series(bucket, Some("0.005")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answers_within_5ms_are_read_from_the_histogram() {
        let path = validating_path::<FleetApp>();
        let metrics = format!(
            "controller_runtime_webhook_latency_seconds_bucket{{le=\"0.0025\",webhook=\"{path}\"}} 90\n\
             controller_runtime_webhook_latency_seconds_bucket{{le=\"0.005\",webhook=\"{path}\"}} 99\n\
             controller_runtime_webhook_latency_seconds_count{{webhook=\"{path}\"}} 100\n"
        );
        assert_eq!(served_within_5ms(&metrics), (100.0, 99.0));
    }
}
