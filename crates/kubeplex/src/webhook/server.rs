//! The webhook server: bound with its certificate before any cluster is contacted, serving once the
//! manager's caches exist, on every replica (admission does not wait for leadership).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use super::router::{Served, router};
use super::webhooks::{Certificate, Webhooks};
use crate::core::Error;
use crate::metrics::WebhookMetrics;
use crate::readiness::{reloading_certificate, self_signed_for, serve_connections};
use crate::runtime::Runtime;

/// How often a certificate directory is looked at for renewed files.
const CERTIFICATE_CHECK: Duration = Duration::from_secs(10);

/// The webhook server, bound, with its certificate, not yet serving.
pub(crate) struct BoundWebhooks {
    settings: Webhooks,
    listener: TcpListener,
    address: SocketAddr,
    tls: TlsAcceptor,
    /// The self-signed certificate in PEM, for the configurations' `caBundle`.
    ca_bundle: Option<String>,
    /// Reads a certificate directory again when it changes.
    reload: Option<BoxFuture<'static, ()>>,
    metrics: WebhookMetrics,
}

impl Webhooks {
    /// Binds the address and reads (or makes) the certificate; `metrics` counts the requests.
    pub(crate) async fn bind(&self, metrics: WebhookMetrics) -> Result<BoundWebhooks, Error> {
        let failed = |reason: String| Error::Webhooks {
            address: self.address.clone(),
            reason,
        };
        let (config, ca_bundle, reload) = match &self.certificate {
            Certificate::Dir(dir) => {
                let (config, reload) =
                    reloading_certificate(dir.clone(), CERTIFICATE_CHECK).map_err(failed)?;
                (config, None, Some(reload.boxed()))
            }
            Certificate::SelfSigned(names) => {
                let (config, pem) = self_signed_for(names).map_err(failed)?;
                (config, Some(pem), None)
            }
        };
        let listener = TcpListener::bind(&self.address).await;
        let listener = listener.map_err(|e| failed(e.to_string()))?;
        let address = listener.local_addr().map_err(|e| failed(e.to_string()))?;
        Ok(BoundWebhooks {
            settings: self.clone(),
            listener,
            address,
            tls: TlsAcceptor::from(Arc::new(config)),
            ca_bundle,
            reload,
            metrics,
        })
    }
}

impl BoundWebhooks {
    /// Where it listens.
    pub(crate) fn address(&self) -> SocketAddr {
        self.address
    }

    /// The self-signed certificate in PEM; `None` with a certificate directory.
    pub(crate) fn ca_bundle(&self) -> Option<String> {
        self.ca_bundle.clone()
    }

    /// Serves until `background` is aborted, its handlers reading `runtime`'s caches.
    pub(crate) fn serve(self, runtime: Arc<Runtime>, background: &mut JoinSet<()>) {
        let served = Served::new(runtime, &self.settings, self.metrics);
        let paths: Vec<&str> = self
            .settings
            .routes
            .iter()
            .map(|r| r.path.as_str())
            .collect();
        let converts = (!self.settings.converters.is_empty()).then_some(super::CONVERSION_PATH);
        let paths = paths
            .into_iter()
            .chain(converts)
            .collect::<Vec<_>>()
            .join(" ");
        tracing::info!(address = %self.address, "serving webhooks over HTTPS: {paths}");
        let router = router(Arc::new(served));
        if let Some(reload) = self.reload {
            background.spawn(reload);
        }
        background.spawn(serve_connections(
            self.listener,
            router,
            Some(self.tls),
            "webhook server",
        ));
    }
}
