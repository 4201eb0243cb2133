//! The webhook server's router: a request read within its limits, handed to the handler of its path (or
//! the converters) under the bound, and answered — by the failure policy when the handler cannot.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use kube::core::{DynamicObject, Status};
use parking_lot::Mutex;
use tokio::time::Instant;

use super::conversion::{CONVERSION_PATH, Converter, convert_all};
use super::outcome::{FailurePolicy, Outcome, bounded};
use super::route::Route;
use crate::core::LogThrottle;
use crate::metrics::WebhookMetrics;
use crate::runtime::Runtime;

/// The largest request body read, as controller-runtime's (7 MiB): an AdmissionReview carries an object
/// and its old version, each at most etcd's 1.5 MiB.
pub(super) const MAX_BODY_BYTES: usize = 7 * 1024 * 1024;
/// How often the same failure of one path's handler is logged again.
const LOG_AGAIN_AFTER: Duration = Duration::from_secs(300);

/// What the server answers with.
pub(super) struct Served {
    pub(super) runtime: Arc<Runtime>,
    pub(super) routes: HashMap<String, Route>,
    pub(super) converters: Vec<Converter>,
    pub(super) timeout: Duration,
    pub(super) policy: FailurePolicy,
    pub(super) metrics: WebhookMetrics,
    /// Per path: its handler's failures, logged when they change and then rarely.
    logged: Mutex<HashMap<String, LogThrottle>>,
}

impl Served {
    pub(super) fn new(
        runtime: Arc<Runtime>,
        settings: &super::Webhooks,
        metrics: WebhookMetrics,
    ) -> Self {
        let routes = settings.routes.iter().map(|r| (r.path.clone(), r.clone()));
        Self {
            runtime,
            routes: routes.collect(),
            converters: settings.converters.clone(),
            timeout: settings.timeout,
            policy: settings.failure_policy,
            metrics,
            logged: Mutex::default(),
        }
    }

    /// Logs that the handler at `path` could not answer, for `cause`: when the cause changes, then every
    /// [`LOG_AGAIN_AFTER`]. Never the request's body: it may carry a Secret.
    pub(super) fn log_failure(&self, path: &str, cause: &str) {
        let mut logged = self.logged.lock();
        let throttle =
            (logged.entry(path.to_owned())).or_insert_with(|| LogThrottle::new(LOG_AGAIN_AFTER));
        if throttle.warn(cause) {
            let policy = self.policy;
            tracing::warn!(webhook = %path, ?policy, "a webhook handler could not answer: {cause}");
        }
    }
}

/// Every path to [`request`].
pub(super) fn router(served: Arc<Served>) -> Router {
    Router::new().fallback(request).with_state(served)
}

async fn request(
    State(served): State<Arc<Served>>,
    method: Method,
    uri: Uri,
    body: Body,
) -> Response {
    let path = uri.path();
    let converts = path == CONVERSION_PATH && !served.converters.is_empty();
    if !converts && !served.routes.contains_key(path) {
        return (
            StatusCode::NOT_FOUND,
            "not found: no webhook at this path\n",
        )
            .into_response();
    }
    if method != Method::POST {
        return (StatusCode::METHOD_NOT_ALLOWED, "a webhook takes POST\n").into_response();
    }
    let began = Instant::now();
    served.metrics.started(path);
    let response = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Err(_) => (
            StatusCode::PAYLOAD_TOO_LARGE,
            "the request body is over 7 MiB, or was cut off\n",
        )
            .into_response(),
        Ok(body) if converts => convert(&served, &body).await,
        Ok(body) => admit(&served, path, &body).await,
    };
    let seconds = began.elapsed().as_secs_f64();
    served
        .metrics
        .finished(path, response.status().as_u16(), seconds);
    response
}

/// Answers an AdmissionReview: 400 when the body is none; else 200 with the handler's verdict.
async fn admit(served: &Served, path: &str, body: &[u8]) -> Response {
    let review: Result<AdmissionReview<DynamicObject>, _> = serde_json::from_slice(body);
    let request: Option<AdmissionRequest<DynamicObject>> =
        review.ok().and_then(|review| review.try_into().ok());
    let Some(request) = request else {
        return (
            StatusCode::BAD_REQUEST,
            "the body is not an AdmissionReview with a request\n",
        )
            .into_response();
    };
    let route = &served.routes[path];
    let work = (route.handle)(request.clone(), served.runtime.clone());
    let outcome = bounded(served.timeout, work, |failed| failed).await;
    let response = decide(served, path, &request, outcome);
    axum::Json(response.into_review()).into_response()
}

/// The answer to `request`, given what became of its handler.
fn decide(
    served: &Served,
    path: &str,
    request: &AdmissionRequest<DynamicObject>,
    outcome: Outcome,
) -> AdmissionResponse {
    let response = AdmissionResponse::from(request);
    let why = match &outcome {
        Outcome::Allowed(None) => return response,
        Outcome::Allowed(Some(patch)) => match response.clone().with_patch(patch.clone()) {
            Ok(patched) => return patched,
            Err(_) => "its patch cannot be written".to_owned(),
        },
        Outcome::Denied(message) => {
            served.metrics.denied(path);
            return refused(response, message.clone());
        }
        Outcome::Invalid(reason) => reason.clone(),
        Outcome::Panicked => "the handler panicked".into(),
        Outcome::TimedOut => format!("the handler did not answer within {:?}", served.timeout),
    };
    served
        .metrics
        .failed(path, outcome.failure().unwrap_or("invalid"));
    // The log names the cause's kind only: a reason may quote the object, which the requester sent but
    // the log's readers may not see.
    let cause = match &outcome {
        Outcome::Panicked | Outcome::TimedOut => why.as_str(),
        _ => "the object does not fit the handler's type",
    };
    served.log_failure(path, cause);
    match served.policy {
        FailurePolicy::Fail => refused(
            response,
            format!("webhook {path} could not check this object: {why}"),
        ),
        FailurePolicy::Ignore => response,
    }
}

/// Answers a ConversionReview: 400 when the body is none; else 200 with every object converted, or the
/// first failure. Conversion always fails closed: an object half converted is never served.
async fn convert(served: &Served, body: &[u8]) -> Response {
    let review: Result<ConversionReview, _> = serde_json::from_slice(body);
    let Some(request) = review
        .ok()
        .and_then(|r| ConversionRequest::from_review(r).ok())
    else {
        return (
            StatusCode::BAD_REQUEST,
            "the body is not a ConversionReview with a request\n",
        )
            .into_response();
    };
    let (desired, objects) = (request.desired_api_version.clone(), request.objects.clone());
    let converters = served.converters.clone();
    let work = Box::pin(async move { convert_all(&converters, objects, &desired) });
    let converted = bounded(served.timeout, work, Err).await;
    let response = ConversionResponse::for_request(request);
    let response = match converted {
        Ok(objects) => response.success(objects),
        Err(outcome) => {
            let why = match &outcome {
                Outcome::Denied(why) | Outcome::Invalid(why) => why.clone(),
                Outcome::Panicked => "the converter panicked".into(),
                _ => format!("the converter did not answer within {:?}", served.timeout),
            };
            let reason = outcome.failure().unwrap_or("invalid");
            served.metrics.failed(CONVERSION_PATH, reason);
            if !matches!(outcome, Outcome::Denied(_)) {
                served.log_failure(CONVERSION_PATH, reason);
            }
            response.failure(Status::failure(&why, "ConversionFailed"))
        }
    };
    axum::Json(response.into_review()).into_response()
}

/// `response`, refusing with `message` as controller-runtime does: `403 Forbidden`, which the API server
/// passes on to its client (without a code, it answers `400 Bad Request`).
fn refused(response: AdmissionResponse, message: String) -> AdmissionResponse {
    let mut response = response.deny(message);
    response.result.code = 403;
    response.result.reason = "Forbidden".into();
    response
}
