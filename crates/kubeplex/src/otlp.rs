//! Span export over OTLP (feature `otlp`): a `tracing` layer that sends the runtime's spans (and yours) to an
//! OpenTelemetry collector over OTLP/HTTP with protobuf bodies.
//!
//! ```no_run
//! use tracing_subscriber::Layer as _;
//! use tracing_subscriber::layer::SubscriberExt as _;
//! use tracing_subscriber::util::SubscriberInitExt as _;
//!
//! # fn main() -> Result<(), kubeplex::otlp::OtlpError> {
//! // Spans go to the collector; the log lines keep their own filter (RUST_LOG, or kubeplex's default).
//! let (otlp, guard) = kubeplex::otlp::layer("http://otel-collector.monitoring:4318", None)?;
//! let filter = tracing_subscriber::EnvFilter::try_from_default_env()
//!     .unwrap_or_else(|_| kubeplex::logging::DEFAULT_LOG_FILTER.into());
//! tracing_subscriber::registry()
//!     .with(tracing_subscriber::fmt::layer().with_filter(filter))
//!     .with(otlp)
//!     .init();
//!
//! // … run the manager …
//!
//! // Sends what is still queued before the process ends.
//! guard.shutdown()?;
//! # Ok(())
//! # }
//! ```
//!
//! The layer filters on its own: spans and events at `INFO` and above, so a global filter such as
//! [`DEFAULT_LOG_FILTER`](crate::logging::DEFAULT_LOG_FILTER) must not sit in front of it (put it on the fmt layer, as
//! above). It leaves out the runtime's `controller` span, which lives as long as its controller: under it,
//! every reconcile of the process would be one trace; without it each `reconcile` span is the root of its own.
//!
//! Spans are batched (every 5 s or 512 spans, at most 2048 queued; a full queue drops spans rather than slow the
//! operator) and sent by a thread of their own, so the exporter neither needs nor blocks the operator's
//! runtime. The standard variables apply: `OTEL_BSP_*` for the batching, `OTEL_TRACES_SAMPLER` (and `_ARG`)
//! for sampling (default: every trace), `OTEL_EXPORTER_OTLP_HEADERS` for headers such as credentials,
//! `OTEL_RESOURCE_ATTRIBUTES` for more resource attributes. A request to the collector times out after 10 s.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt as _, Full, Limited};
use hyper::Uri;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{Connect, HttpConnector};
use hyper_util::rt::TokioExecutor;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

/// The path OTLP/HTTP collectors take traces on, appended to the endpoint.
const TRACES_PATH: &str = "/v1/traces";

/// How long one request to the collector may take (the OTLP default).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The most of a collector's answer that is read (its body is a small status message).
const MAX_RESPONSE_BYTES: usize = 1 << 20;

/// Why [`layer`] could not be built, or [`Guard::shutdown`] could not send what was queued.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtlpError {
    /// The endpoint is not an `http://` or `https://` URL with a host.
    #[error("OTLP endpoint {endpoint:?} is not an http:// or https:// URL: {reason}")]
    Endpoint {
        /// The endpoint as given.
        endpoint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An `https://` endpoint, but the system's root certificates could not be read.
    #[error("cannot read the system's root certificates for the OTLP endpoint: {0}")]
    RootCertificates(#[source] std::io::Error),
    /// The thread that sends the spans could not be started.
    #[error("cannot start the OTLP exporter's thread: {0}")]
    Thread(#[source] std::io::Error),
    /// The OpenTelemetry exporter rejected its configuration (an `OTEL_EXPORTER_OTLP_*` variable, mostly).
    #[error("cannot build the OTLP exporter: {0}")]
    Exporter(#[source] Box<dyn StdError + Send + Sync>),
    /// The spans still queued could not be sent at shutdown (the collector did not answer in time, or failed).
    #[error("cannot flush the OTLP exporter: {0}")]
    Flush(#[source] Box<dyn StdError + Send + Sync>),
}

/// Keeps the exporter running; [`shutdown`](Guard::shutdown) (or dropping it) sends the spans still queued.
///
/// Hold it until the operator has stopped, then shut it down: spans are sent in batches, and the last
/// batch, with the reconciles of the shutdown, is only sent then. Shutting down blocks for at most 5 s.
#[must_use = "dropping the guard shuts the exporter down at once"]
pub struct Guard {
    provider: Option<SdkTracerProvider>,
}

impl Guard {
    /// Sends the spans queued so far, and keeps exporting.
    pub fn flush(&self) -> Result<(), OtlpError> {
        match &self.provider {
            Some(provider) => provider
                .force_flush()
                .map_err(|e| OtlpError::Flush(Box::new(e))),
            None => Ok(()),
        }
    }

    /// Sends the spans still queued and stops the exporter; spans ended after this are dropped.
    pub fn shutdown(mut self) -> Result<(), OtlpError> {
        match self.provider.take() {
            Some(provider) => provider
                .shutdown()
                .map_err(|e| OtlpError::Flush(Box::new(e))),
            None => Ok(()),
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            // Nowhere to report a failure from here; `shutdown` returns it.
            let _ = provider.shutdown();
        }
    }
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("running", &self.provider.is_some())
            .finish()
    }
}

/// A layer that exports spans to the OTLP/HTTP collector at `endpoint`, and the guard that flushes it.
///
/// `endpoint` is the collector's base URL, as in `OTEL_EXPORTER_OTLP_ENDPOINT`
/// (`http://otel-collector:4318`); `/v1/traces` is appended unless the URL already ends with it. `https://`
/// endpoints are verified against the system's root certificates. `service_name` becomes the resource
/// attribute `service.name`; `None` takes `OTEL_SERVICE_NAME`, or else the name of the running binary.
///
/// The layer keeps spans and events at `INFO` and above and leaves out the runtime's long-lived
/// `controller` span (see [the module](self)). Narrow it further with
/// [`Layer::with_filter`] if you like. Spans are sent in batches from
/// a thread of the exporter's own; the returned [`Guard`] sends the last batch when shut down or dropped.
///
/// ```no_run
/// use tracing_subscriber::layer::SubscriberExt as _;
///
/// # fn main() -> Result<(), kubeplex::otlp::OtlpError> {
/// let (otlp, guard) = kubeplex::otlp::layer("http://localhost:4318", Some("my-operator"))?;
/// let subscriber = tracing_subscriber::registry().with(otlp);
/// tracing::subscriber::with_default(subscriber, || {
///     let _reconcile = tracing::info_span!("reconcile", controller = "my-controller").entered();
/// });
/// guard.shutdown()?;
/// # Ok(())
/// # }
/// ```
pub fn layer<S>(
    endpoint: &str,
    service_name: Option<&str>,
) -> Result<(impl Layer<S>, Guard), OtlpError>
where
    S: Subscriber + for<'span> LookupSpan<'span>,
{
    let (uri, https) = traces_uri(endpoint)?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(uri.to_string())
        .with_timeout(EXPORT_TIMEOUT);
    let exporter = if https {
        let provider = rustls::crypto::CryptoProvider::get_default()
            .cloned()
            .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(provider)
            .map_err(OtlpError::RootCertificates)?
            .https_only()
            .enable_http1()
            .build();
        exporter.with_http_client(RuntimeClient::new(connector)?)
    } else {
        exporter.with_http_client(RuntimeClient::new(HttpConnector::new())?)
    };
    let exporter = exporter
        .build()
        .map_err(|e| OtlpError::Exporter(Box::new(e)))?;
    let service_name = service_name
        .map(str::to_owned)
        .or_else(|| {
            std::env::var("OTEL_SERVICE_NAME")
                .ok()
                .filter(|n| !n.is_empty())
        })
        .unwrap_or_else(binary_name);
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(Resource::builder().with_service_name(service_name).build())
        .build();
    let tracer = provider.tracer("kubeplex");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(tracing_subscriber::filter::filter_fn(exported));
    Ok((
        layer,
        Guard {
            provider: Some(provider),
        },
    ))
}

/// What the layer sends: `INFO` and above, without the runtime's `controller` span.
fn exported(metadata: &tracing::Metadata<'_>) -> bool {
    let controller_span = metadata.is_span()
        && metadata.name() == "controller"
        && metadata.target().starts_with("kubeplex");
    *metadata.level() <= tracing::Level::INFO && !controller_span
}

/// The running binary's file name (`fleet`), the default `service.name`.
fn binary_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|path| path.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .or_else(|| {
            let arg0 = std::env::args_os().next()?;
            let path = std::path::PathBuf::from(arg0);
            Some(path.file_stem()?.to_string_lossy().into_owned())
        })
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "kubeplex".to_owned())
}

/// The URL spans are posted to, and whether it is `https`.
fn traces_uri(endpoint: &str) -> Result<(Uri, bool), OtlpError> {
    let invalid = |reason: String| OtlpError::Endpoint {
        endpoint: endpoint.to_owned(),
        reason,
    };
    let uri: Uri = endpoint
        .trim()
        .parse()
        .map_err(|e| invalid(format!("{e}")))?;
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        Some(other) => return Err(invalid(format!("the scheme is {other:?}"))),
        None => return Err(invalid("no scheme".to_owned())),
    };
    if uri.host().is_none_or(str::is_empty) {
        return Err(invalid("no host".to_owned()));
    }
    let path = uri.path().trim_end_matches('/');
    if path.ends_with(TRACES_PATH) {
        return Ok((uri, https));
    }
    let mut parts = uri.clone().into_parts();
    let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
    parts.path_and_query = Some(
        format!("{path}{TRACES_PATH}{query}")
            .parse()
            .map_err(|e| invalid(format!("{e}")))?,
    );
    let uri = Uri::from_parts(parts).map_err(|e| invalid(format!("{e}")))?;
    Ok((uri, https))
}

/// hyper's client, run on a small runtime of its own: the batch exporter calls it from a plain thread
/// (`block_on`), where hyper finds no Tokio runtime, and a runtime of the operator's could be the very one
/// blocked in [`Guard::shutdown`].
#[derive(Debug)]
struct RuntimeClient<C> {
    client: Client<C, Full<Bytes>>,
    runtime: ExportRuntime,
}

impl<C: Connect + Clone + Send + Sync + 'static> RuntimeClient<C> {
    fn new(connector: C) -> Result<Self, OtlpError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("kubeplex-otlp")
            .enable_io()
            .enable_time()
            .build()
            .map_err(OtlpError::Thread)?;
        Ok(Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
            runtime: ExportRuntime(Some(runtime)),
        })
    }
}

impl<C: Connect + Clone + Send + Sync + fmt::Debug + 'static> HttpClient for RuntimeClient<C> {
    fn send_bytes<'client, 'future>(
        &'client self,
        request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'future>>
    where
        'client: 'future,
        Self: 'future,
    {
        let client = self.client.clone();
        let send = async move {
            let response = client.request(request.map(Full::new)).await?;
            let (parts, body) = response.into_parts();
            let body = Limited::new(body, MAX_RESPONSE_BYTES)
                .collect()
                .await?
                .to_bytes();
            Ok::<_, HttpError>(Response::from_parts(parts, body))
        };
        let sent = self.runtime.0.as_ref().map(|runtime| {
            runtime.spawn(async move {
                tokio::time::timeout(EXPORT_TIMEOUT, send)
                    .await
                    .unwrap_or_else(|_| Err("the OTLP collector did not answer in time".into()))
            })
        });
        Box::pin(async move {
            match sent {
                Some(task) => task.await?,
                None => Err("the OTLP exporter's runtime has stopped".into()),
            }
        })
    }
}

/// The exporter's runtime, stopped without waiting when dropped (which may happen on any thread, an async
/// one included, where dropping a runtime the ordinary way panics).
#[derive(Debug)]
struct ExportRuntime(Option<tokio::runtime::Runtime>);

impl Drop for ExportRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri(endpoint: &str) -> String {
        traces_uri(endpoint).unwrap().0.to_string()
    }

    #[test]
    fn the_traces_path_is_appended_to_a_base_url_once() {
        assert_eq!(
            uri("http://collector:4318"),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            uri("http://collector:4318/"),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            uri("https://otlp.example.com/otlp"),
            "https://otlp.example.com/otlp/v1/traces"
        );
        assert_eq!(
            uri("http://collector:4318/v1/traces"),
            "http://collector:4318/v1/traces"
        );
        assert!(traces_uri("https://x").unwrap().1);
        assert!(!traces_uri("http://x").unwrap().1);
    }

    #[test]
    fn an_endpoint_that_is_not_an_http_url_is_refused() {
        for endpoint in ["collector:4318", "grpc://collector:4317", "", "http://"] {
            let error = traces_uri(endpoint).unwrap_err();
            assert!(
                matches!(error, OtlpError::Endpoint { .. }),
                "{endpoint}: {error}"
            );
        }
    }
}
