//! Feature `otlp`: spans reach an OTLP/HTTP collector (a stand-in that records what is posted) as protobuf,
//! with the service name, the span names and fields, and the parent links the runtime's spans should have.
//! A binary of its own, built only with the feature, so that CI's build with it compiles this alone and
//! not the runtime suite again.

// The runtime suite's helpers; this binary uses a few.
#[path = "../runtime/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use axum::routing::post;
use parking_lot::Mutex;
use tracing_subscriber::layer::SubscriberExt as _;

/// What the stand-in collector was sent: each request's content type and body.
type Received = Arc<Mutex<Vec<(String, Bytes)>>>;

/// Serves `POST /v1/traces` on 127.0.0.1 and records the requests; returns the endpoint (base URL).
fn start_collector(runtime: &tokio::runtime::Runtime, received: Received) -> String {
    let app = axum::Router::new().route(
        "/v1/traces",
        post(move |headers: HeaderMap, body: Bytes| async move {
            let content_type = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            received.lock().push((content_type, body));
            // An empty ExportTraceServiceResponse: everything accepted.
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/x-protobuf")],
            )
        }),
    );
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let address = listener.local_addr().unwrap();
    runtime.spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}")
}

#[test]
fn reconcile_spans_reach_the_collector_as_protobuf() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let received = Received::default();
    let endpoint = start_collector(&runtime, received.clone());

    let (layer, guard) = kubeplex::otlp::layer(&endpoint, Some("otlp-test")).unwrap();
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        // As the runtime nests them: a controller's long-lived span, a reconcile in it, its child spans.
        let _controller = tracing::info_span!(
            target: "kubeplex::controller_loop",
            "controller",
            controller = "app-deployer",
            marker = "only-on-the-controller-span",
        )
        .entered();
        let _reconcile = tracing::info_span!(
            target: "kubeplex::reconcile",
            "reconcile",
            controller = "app-deployer",
            cluster = "control",
            namespace = "crds",
            name = "web",
            reconcile_id = "reconcile-0001",
        )
        .entered();
        tracing::info_span!(target: "kubeplex::children", "apply", cluster = "cluster-a")
            .in_scope(|| tracing::warn!(cluster = "cluster-a", "child conflict on web-cluster-a"));
        tracing::debug_span!("too-detailed-to-export").in_scope(|| {});
    });
    // Nothing has been sent yet (the batch waits 5 s); shutting down sends it.
    guard.shutdown().unwrap();

    let received = received.lock().clone();
    assert!(!received.is_empty(), "the collector received nothing");
    for (content_type, _) in &received {
        assert_eq!(content_type, "application/x-protobuf");
    }
    // The byte check first: protobuf strings are their UTF-8 bytes.
    let bodies: Vec<u8> = received
        .iter()
        .flat_map(|(_, body)| body.to_vec())
        .collect();
    for text in [
        "otlp-test",
        "reconcile",
        "app-deployer",
        "control",
        "crds",
        "reconcile-0001",
        "apply",
        "cluster-a",
        "child conflict on web-cluster-a",
    ] {
        assert!(contains(&bodies, text.as_bytes()), "{text:?} was not sent");
    }
    // Then what it says, decoded.
    let mut spans = Vec::new();
    for (_, body) in &received {
        for resource_spans in decode::request(body) {
            assert_eq!(
                resource_spans
                    .resource
                    .get("service.name")
                    .map(String::as_str),
                Some("otlp-test")
            );
            spans.extend(resource_spans.spans);
        }
    }
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert!(!names.contains(&"controller"), "{names:?}");
    assert!(!names.contains(&"too-detailed-to-export"), "{names:?}");
    assert!(
        !contains(&bodies, b"only-on-the-controller-span"),
        "{names:?}"
    );
    let reconcile = spans
        .iter()
        .find(|s| s.name == "reconcile")
        .expect("no reconcile span");
    for (key, value) in [
        ("controller", "app-deployer"),
        ("cluster", "control"),
        ("namespace", "crds"),
        ("name", "web"),
        ("reconcile_id", "reconcile-0001"),
    ] {
        assert_eq!(
            reconcile.attributes.get(key).map(String::as_str),
            Some(value),
            "{key}: {reconcile:?}"
        );
    }
    // The root of its own trace, not a child of the controller's span.
    assert!(reconcile.parent_span_id.is_empty(), "{reconcile:?}");
    assert_eq!(reconcile.trace_id.len(), 16);
    let apply = spans
        .iter()
        .find(|s| s.name == "apply")
        .expect("no apply span");
    assert_eq!(apply.parent_span_id, reconcile.span_id);
    assert_eq!(apply.trace_id, reconcile.trace_id);
    assert_eq!(
        apply.attributes.get("cluster").map(String::as_str),
        Some("cluster-a")
    );
    assert_eq!(apply.events, ["child conflict on web-cluster-a"]);
}

/// What the runtime's own reconciles export: a real manager on a real API server, its spans sent by the
/// layer installed as the process's subscriber.
#[test]
fn a_real_reconcile_exports_its_span_tree() {
    use crate::support::Fleet;
    use kubeplex::prelude::*;

    #[controller(
        crd = k8s_openapi::api::core::v1::ConfigMap,
        contexts = [Fleet::Control],
        namespaces = ["traced"],
        owns(k8s_openapi::api::core::v1::ServiceAccount, contexts = [Fleet::Control], namespaces = ["traced"]),
    )]
    struct Traced;

    impl Reconcile for Traced {
        type Error = kubeplex::Error;

        async fn reconcile(
            &self,
            object: Arc<k8s_openapi::api::core::v1::ConfigMap>,
            cx: &Cx<Fleet>,
        ) -> Result<Action, Self::Error> {
            let mut child = k8s_openapi::api::core::v1::ServiceAccount::default();
            child.metadata.name = object.metadata.name.clone();
            child.metadata.namespace = Some("traced".into());
            cx.child(Fleet::Control, child)?;
            Ok(Action::await_change())
        }
    }

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let received = Received::default();
    let endpoint = start_collector(&runtime, received.clone());
    let (layer, guard) = kubeplex::otlp::layer(&endpoint, Some("otlp-runtime")).unwrap();
    // The runtime's tasks run on every worker thread: the subscriber is the process's.
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer)).unwrap();
    runtime.block_on(async {
        let env = kubeplex_testenv::TestEnv::builder()
            .clusters(["control"])
            .start()
            .await
            .unwrap();
        let control = env.client("control").await.unwrap();
        crate::support::create_namespace(&control, "traced").await;
        let running = kubeplex::Manager::with_kubeconfig(env.kubeconfig().clone())
            .controller(Traced)
            .start()
            .await
            .unwrap();
        crate::support::wait_started(&running, "the manager").await;
        crate::support::put_config_map(&control, "traced", "web", "1").await;
        let accounts: kube::Api<k8s_openapi::api::core::v1::ServiceAccount> =
            kube::Api::namespaced(control.clone(), "traced");
        let deadline = tokio::time::Instant::now() + crate::support::WAIT;
        while accounts.get_opt("web").await.unwrap().is_none() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the child never appeared"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        crate::support::stop(running).await;
    });
    guard.shutdown().unwrap();

    let received = received.lock().clone();
    let spans: Vec<decode::Span> = received
        .iter()
        .flat_map(|(_, body)| decode::request(body))
        .flat_map(|resource_spans| resource_spans.spans)
        .collect();
    let reconcile = spans
        .iter()
        .find(|s| {
            s.name == "reconcile" && s.attributes.get("name").map(String::as_str) == Some("web")
        })
        .unwrap_or_else(|| {
            panic!(
                "no reconcile span of web: {:?}",
                spans.iter().map(|s| &s.name).collect::<Vec<_>>()
            )
        });
    for (key, value) in [
        ("controller", "traced"),
        ("cluster", "control"),
        ("namespace", "traced"),
    ] {
        assert_eq!(
            reconcile.attributes.get(key).map(String::as_str),
            Some(value),
            "{key}: {reconcile:?}"
        );
    }
    assert!(
        reconcile.attributes.contains_key("reconcile_id"),
        "{reconcile:?}"
    );
    let apply = spans
        .iter()
        .find(|s| s.name == "apply" && s.parent_span_id == reconcile.span_id)
        .unwrap_or_else(|| panic!("no apply span under the reconcile: {spans:?}"));
    assert_eq!(
        apply.attributes.get("cluster").map(String::as_str),
        Some("control")
    );
    assert!(
        spans
            .iter()
            .any(|s| s.name == "status_write" && s.trace_id == reconcile.trace_id),
        "the status write is in the reconcile's trace: {spans:?}"
    );
}

#[test]
fn an_endpoint_that_is_not_an_http_url_is_an_error() {
    let error = kubeplex::otlp::layer::<tracing_subscriber::Registry>("otel-collector:4317", None)
        .map(|_| ())
        .unwrap_err();
    assert!(
        matches!(error, kubeplex::otlp::OtlpError::Endpoint { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("otel-collector:4317"), "{error}");
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Just enough protobuf to read an `ExportTraceServiceRequest` (opentelemetry-proto's `trace.proto`).
mod decode {
    use super::BTreeMap;

    /// One `ResourceSpans`: the resource's string attributes and every span of its scopes.
    pub struct ResourceSpans {
        pub resource: BTreeMap<String, String>,
        pub spans: Vec<Span>,
    }

    #[derive(Debug)]
    pub struct Span {
        pub trace_id: Vec<u8>,
        pub span_id: Vec<u8>,
        pub parent_span_id: Vec<u8>,
        pub name: String,
        /// String-valued attributes only.
        pub attributes: BTreeMap<String, String>,
        /// The events' names (an event's message).
        pub events: Vec<String>,
    }

    enum Value<'a> {
        Varint,
        Fixed,
        Bytes(&'a [u8]),
    }

    /// The fields of one message, in order: (field number, value).
    fn fields(mut buf: &[u8]) -> Vec<(u64, Value<'_>)> {
        let mut out = Vec::new();
        while !buf.is_empty() {
            let key = varint(&mut buf);
            let value = match key & 7 {
                0 => {
                    varint(&mut buf);
                    Value::Varint
                }
                1 => {
                    buf = &buf[8..];
                    Value::Fixed
                }
                2 => {
                    let len = usize::try_from(varint(&mut buf)).unwrap();
                    let (bytes, rest) = buf.split_at(len);
                    buf = rest;
                    Value::Bytes(bytes)
                }
                5 => {
                    buf = &buf[4..];
                    Value::Fixed
                }
                wire => panic!("unexpected protobuf wire type {wire}"),
            };
            out.push((key >> 3, value));
        }
        out
    }

    fn varint(buf: &mut &[u8]) -> u64 {
        let mut value = 0;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = buf.split_first().expect("truncated varint");
            *buf = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return value;
            }
        }
        panic!("varint longer than 64 bits")
    }

    /// The length-delimited fields numbered `number`.
    fn bytes(message: &[u8], number: u64) -> Vec<&[u8]> {
        fields(message)
            .into_iter()
            .filter_map(|(n, v)| match v {
                Value::Bytes(b) if n == number => Some(b),
                _ => None,
            })
            .collect()
    }

    fn string(message: &[u8], number: u64) -> String {
        bytes(message, number)
            .last()
            .map(|b| String::from_utf8(b.to_vec()).unwrap())
            .unwrap_or_default()
    }

    /// `repeated KeyValue` → the string values (`AnyValue.string_value`, field 1).
    fn attributes(message: &[u8], number: u64) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for key_value in bytes(message, number) {
            if let Some(any) = bytes(key_value, 2).last()
                && !bytes(any, 1).is_empty()
            {
                out.insert(string(key_value, 1), string(any, 1));
            }
        }
        out
    }

    pub fn request(body: &[u8]) -> Vec<ResourceSpans> {
        bytes(body, 1)
            .into_iter()
            .map(|resource_spans| ResourceSpans {
                resource: bytes(resource_spans, 1)
                    .last()
                    .map(|resource| attributes(resource, 1))
                    .unwrap_or_default(),
                spans: bytes(resource_spans, 2)
                    .into_iter()
                    .flat_map(|scope_spans| bytes(scope_spans, 2))
                    .map(span)
                    .collect(),
            })
            .collect()
    }

    fn span(message: &[u8]) -> Span {
        Span {
            trace_id: bytes(message, 1).concat(),
            span_id: bytes(message, 2).concat(),
            parent_span_id: bytes(message, 4).concat(),
            name: string(message, 5),
            attributes: attributes(message, 9),
            events: bytes(message, 11)
                .into_iter()
                .map(|event| string(event, 2))
                .collect(),
        }
    }
}
