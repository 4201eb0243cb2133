//! The webhook server's routes without an API server: requests as the API server sends them, answered by
//! handlers that refuse, mutate, panic or overrun, under either failure policy; and what is not a webhook
//! request.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::router::{MAX_BODY_BYTES, Served, router};
use super::{AdmissionRequest, FailurePolicy, FleetView, Mutate, Validate, Webhooks};
use super::{mutating_path, validating_path};
use crate::core::ContextName;
use crate::metrics::WebhookMetrics;
use crate::runtime::Runtime;

/// Refuses `refused`, panics on `panics`, overruns on `slow`; admits the rest.
struct ByName;

impl Validate for ByName {
    type Context = ContextName;
    type Kind = ConfigMap;

    async fn validate(
        &self,
        request: &AdmissionRequest<ConfigMap>,
        _: &FleetView<ContextName>,
    ) -> Result<(), String> {
        match request.name.as_str() {
            "refused" => Err("not this one".into()),
            "panics" => panic!("a handler's bug"),
            "slow" => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// Sets `data.defaulted`.
struct Defaulted;

impl Mutate for Defaulted {
    type Context = ContextName;
    type Kind = ConfigMap;

    async fn mutate(
        &self,
        object: &mut ConfigMap,
        _: &AdmissionRequest<ConfigMap>,
        _: &FleetView<ContextName>,
    ) -> Result<(), String> {
        let data = object.data.get_or_insert_default();
        data.insert("defaulted".into(), "yes".into());
        Ok(())
    }
}

fn server(policy: FailurePolicy) -> axum::Router {
    let webhooks = Webhooks::new("127.0.0.1:0")
        .failure_policy(policy)
        .validate(ByName)
        .mutate(Defaulted);
    let runtime = Runtime::of_clients([]);
    router(Arc::new(Served::new(
        runtime,
        &webhooks,
        WebhookMetrics::default(),
    )))
}

/// An AdmissionReview creating ConfigMap `name`, with a field the handler's type does not know.
fn review(name: &str) -> Value {
    json!({ "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "uid-1", "kind": { "group": "", "version": "v1", "kind": "ConfigMap" },
        "resource": { "group": "", "version": "v1", "resource": "configmaps" },
        "name": name, "namespace": "ns", "operation": "CREATE", "userInfo": { "username": "alice" },
        "object": { "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name, "namespace": "ns" },
            "data": { "kept": "as sent" }, "unknownField": 1 } } })
}

async fn post(server: &axum::Router, path: &str, body: impl Into<Body>) -> (StatusCode, Value) {
    let request = Request::post(path).body(body.into()).unwrap();
    let response = server.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

async fn answer(server: &axum::Router, path: &str, name: &str) -> Value {
    let (status, body) = post(server, path, review(name).to_string()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["response"]["uid"], "uid-1", "{body}");
    body["response"].clone()
}

#[tokio::test(start_paused = true)]
async fn a_handler_that_panics_or_overruns_answers_by_the_failure_policy() {
    let path = validating_path::<ConfigMap>();
    let fail = server(FailurePolicy::Fail);
    assert_eq!(answer(&fail, &path, "fine").await["allowed"], true);
    let refused = answer(&fail, &path, "refused").await;
    assert_eq!(refused["allowed"], false);
    assert_eq!(refused["status"]["message"], "not this one");
    assert_eq!(
        refused["status"]["code"], 403,
        "as controller-runtime refuses: {refused}"
    );

    let panicked = answer(&fail, &path, "panics").await;
    assert_eq!(panicked["allowed"], false);
    let message = panicked["status"]["message"].as_str().unwrap();
    assert!(
        message.ends_with("could not check this object: the handler panicked"),
        "{message}"
    );
    let began = tokio::time::Instant::now();
    let overran = answer(&fail, &path, "slow").await;
    assert_eq!(began.elapsed(), super::DEFAULT_HANDLER_TIMEOUT);
    assert_eq!(overran["allowed"], false);
    let message = overran["status"]["message"].as_str().unwrap();
    assert!(message.contains("did not answer within 3s"), "{message}");

    let ignore = server(FailurePolicy::Ignore);
    assert_eq!(answer(&ignore, &path, "panics").await["allowed"], true);
    assert_eq!(answer(&ignore, &path, "slow").await["allowed"], true);
    assert_eq!(
        answer(&ignore, &path, "refused").await["allowed"],
        false,
        "a refusal stands"
    );
}

#[tokio::test]
async fn a_mutation_is_a_json_patch_of_the_handler_s_changes_only() {
    let mutated = answer(
        &server(FailurePolicy::Fail),
        &mutating_path::<ConfigMap>(),
        "any",
    )
    .await;
    assert_eq!(mutated["allowed"], true);
    assert_eq!(mutated["patchType"], "JSONPatch");
    // kube's AdmissionResponse writes the patch's bytes as an array of numbers (the API server reads both).
    let patch: Vec<u8> = serde_json::from_value(mutated["patch"].clone()).unwrap();
    let patch: Value = serde_json::from_slice(&patch).unwrap();
    assert_eq!(
        patch,
        json!([{ "op": "add", "path": "/data/defaulted", "value": "yes" }]),
        "the field the type does not know and the data sent are left alone"
    );
}

#[tokio::test]
async fn what_is_not_a_webhook_request_is_refused() {
    let server = server(FailurePolicy::Fail);
    let path = validating_path::<ConfigMap>();
    let (status, _) = post(&server, "/validate-apps-v1-deployment", "{}").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let get = Request::get(&path).body(Body::empty()).unwrap();
    let status = server.clone().oneshot(get).await.unwrap().status();
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    let (status, _) = post(&server, &path, "{\"kind\": \"AdmissionReview\"}").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = post(&server, &path, vec![b' '; MAX_BODY_BYTES + 1]).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    let (status, _) = post(&server, super::CONVERSION_PATH, "{}").await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "no converter, no conversion path"
    );
}
