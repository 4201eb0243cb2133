//! Secure metrics, as controller-runtime serves them: `/metrics` over HTTPS on a port of its own, each
//! scrape authenticated by a TokenReview (for the audiences asked, and within a budget of new tokens) and
//! authorised by a SubjectAccessReview ([`ScrapeReview`]); the probe port then serves the probes only.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::scrape_review::{METRICS_PATH, ScrapeAccess, ScrapeReview};
use crate::client::Access;
use crate::core::{Context, Error};

/// Serves `/metrics` over HTTPS on an address of its own, to scrapers whose bearer token the API server
/// of `context` authenticates (TokenReview) and whose user it allows `get` on the non-resource URL
/// `/metrics` (SubjectAccessReview); see [`Manager::secure_metrics`](crate::Manager::secure_metrics).
///
/// ```
/// # kubeplex::contexts! { enum Fleet { Control = "control" } }
/// let metrics = kubeplex::SecureMetrics::new(Fleet::Control, "0.0.0.0:8443")
///     .cert_dir("/tmp/k8s-metrics-server/serving-certs");
/// let manager = kubeplex::Manager::new().probes("0.0.0.0:8080").secure_metrics(metrics);
/// # let _ = manager;
/// ```
#[derive(Clone, Debug)]
pub struct SecureMetrics {
    pub(crate) context: String,
    pub(crate) address: String,
    cert_dir: Option<PathBuf>,
    audiences: Vec<String>,
}

impl SecureMetrics {
    /// `/metrics` on `address` (e.g. `0.0.0.0:8443`; port 0 picks one), its scrapers reviewed by the API
    /// server of `context` — the cluster the operator runs in, where its scraper's ServiceAccount is.
    /// The certificate is signed by itself, made at start, unless [`cert_dir`](Self::cert_dir) names one.
    pub fn new(context: impl Context, address: impl Into<String>) -> Self {
        Self {
            context: context.name().to_owned(),
            address: address.into(),
            cert_dir: None,
            audiences: Vec::new(),
        }
    }

    /// Accepts only tokens valid for one of `audiences` (the TokenReview's `spec.audiences`), e.g. a
    /// projected ServiceAccount token made for this operator's metrics; by default a token valid for the
    /// API server itself (a ServiceAccount's ordinary token). A token meant for something else can then not
    /// be replayed here.
    pub fn audiences<I: IntoIterator<Item = S>, S: Into<String>>(mut self, audiences: I) -> Self {
        self.audiences = audiences.into_iter().map(Into::into).collect();
        self
    }

    /// Presents the certificate in `dir`: `tls.crt` (PEM, the chain) and `tls.key` (PEM), the files a
    /// `kubernetes.io/tls` Secret mounts. They are read at start: a renewed certificate is served after a
    /// restart.
    pub fn cert_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cert_dir = Some(dir.into());
        self
    }

    /// Binds the address and reads (or makes) the certificate; serving waits for the context's client.
    pub(crate) async fn bind(&self) -> Result<BoundSecureMetrics, Error> {
        let failed = |reason: String| Error::SecureMetrics {
            address: self.address.clone(),
            reason,
        };
        let config = super::serving_certificate::server_config(self.cert_dir.as_deref());
        let config = config.map_err(failed)?;
        let listener = TcpListener::bind(&self.address).await;
        let listener = listener.map_err(|e| failed(e.to_string()))?;
        let address = listener.local_addr().map_err(|e| failed(e.to_string()))?;
        Ok(BoundSecureMetrics {
            settings: self.clone(),
            listener,
            address,
            tls: TlsAcceptor::from(Arc::new(config)),
        })
    }
}

/// The secure metrics port, bound, with its certificate, not yet serving.
pub(crate) struct BoundSecureMetrics {
    settings: SecureMetrics,
    listener: TcpListener,
    address: SocketAddr,
    tls: TlsAcceptor,
}

impl BoundSecureMetrics {
    /// Where it listens.
    pub(crate) fn address(&self) -> SocketAddr {
        self.address
    }

    /// The context whose API server reviews the scrapes.
    pub(crate) fn context(&self) -> &str {
        &self.settings.context
    }

    /// The server, reviewing scrapes with a client of its own on `access` (no fence: a standby replica's
    /// reviews are no writes to hold back); run it until aborted.
    pub(crate) fn serve(
        self,
        access: &Access,
        registry: Arc<Registry>,
    ) -> Result<impl Future<Output = ()> + Send + 'static, Error> {
        let client = crate::client::own_client(access).map_err(|reason| Error::SecureMetrics {
            address: self.settings.address.clone(),
            reason: format!(
                "context {}: cannot build a client: {reason}",
                self.context()
            ),
        })?;
        let audiences = self.settings.audiences.clone();
        let review = ScrapeReview::new(client, self.context(), audiences);
        let router = routes(Arc::new(Scrapes { review, registry }));
        tracing::info!(address = %self.address, cluster = %self.settings.context, "serving /metrics over HTTPS to reviewed scrapers");
        let served = super::connections::serve(
            self.listener,
            router,
            Some(self.tls),
            "secure metrics server",
        );
        Ok(served)
    }
}

/// What a scrape reads.
struct Scrapes {
    review: ScrapeReview,
    registry: Arc<Registry>,
}

/// `/metrics` (GET and HEAD; other methods 405), nothing else (404).
fn routes(scrapes: Arc<Scrapes>) -> Router {
    let not_found = || async { (StatusCode::NOT_FOUND, "not found; the path is /metrics\n") };
    Router::new()
        .route(METRICS_PATH, get(scrape))
        .fallback(not_found)
        .with_state(scrapes)
}

async fn scrape(State(scrapes): State<Arc<Scrapes>>, headers: HeaderMap) -> Response {
    let authorization = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes());
    match scrapes.review.review(authorization).await {
        Ok(ScrapeAccess::Allowed) => super::probes::metrics_answer(&scrapes.registry),
        // Too many new tokens lately: no review asked, the caller may try again in a second.
        Ok(ScrapeAccess::Throttled) => (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, "1")],
            "Too Many Requests: too many new tokens to review; try again later\n",
        )
            .into_response(),
        Ok(ScrapeAccess::Unauthenticated) => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "Unauthorized: a bearer token the API server accepts is required\n",
        )
            .into_response(),
        Ok(ScrapeAccess::Forbidden { user }) => {
            tracing::debug!(%user, "secure metrics: a scrape was refused");
            let body = format!("Forbidden: user {user:?} may not get {METRICS_PATH}\n");
            (StatusCode::FORBIDDEN, body).into_response()
        }
        // Why is in the operator's log: a caller not yet authenticated learns nothing of the cluster.
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "Service Unavailable: the scrape's credentials could not be reviewed\n",
        )
            .into_response(),
    }
}
