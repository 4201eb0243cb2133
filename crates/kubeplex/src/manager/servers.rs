//! The manager's servers: the probe server, the secure metrics server when asked for (which takes
//! `/metrics` off the probe port), and the webhook server when asked for.

use std::net::SocketAddr;
use std::sync::Arc;

use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::client::ClientPool;
use crate::core::{Error, Result};
use crate::metrics::WebhookMetrics;
use crate::readiness::{BoundSecureMetrics, Readiness, SecureMetrics};
use crate::runtime::Runtime;
use crate::webhook::{BoundWebhooks, Webhooks};

/// The servers, bound before any cluster is contacted, so that a taken port fails the start at once.
pub(super) struct Servers {
    pub(super) probe_address: Option<SocketAddr>,
    secure: Option<BoundSecureMetrics>,
    webhooks: Option<BoundWebhooks>,
    registry: Arc<Registry>,
}

impl Servers {
    /// Binds the secure metrics server (serving waits for [`serve_metrics`](Self::serve_metrics)) and
    /// starts the probe server, with `/metrics` unless the secure server serves it.
    pub(super) async fn bind(
        probes: Option<&str>,
        secure: Option<&SecureMetrics>,
        readiness: &Arc<Readiness>,
        registry: Arc<Registry>,
        background: &mut JoinSet<()>,
    ) -> Result<Self> {
        let secure = match secure {
            Some(secure) => Some(secure.bind().await?),
            None => None,
        };
        let probe_address = match probes {
            Some(address) => {
                let probe_error = |source| Error::Probes {
                    address: address.to_owned(),
                    source,
                };
                let listener = TcpListener::bind(address).await.map_err(probe_error)?;
                let bound = listener.local_addr().map_err(probe_error)?;
                let metrics = secure.is_none().then(|| registry.clone());
                let paths = match metrics {
                    Some(_) => "/startupz /readyz /livez /metrics",
                    None => "/startupz /readyz /livez",
                };
                background.spawn(crate::readiness::serve_probes(
                    listener,
                    readiness.clone(),
                    metrics,
                ));
                tracing::info!(address = %bound, "serving {paths}");
                Some(bound)
            }
            None => None,
        };
        Ok(Self {
            probe_address,
            secure,
            webhooks: None,
            registry,
        })
    }

    /// Starts the secure metrics server, if asked for, now that its context has a client in `pool`;
    /// where it listens.
    pub(super) fn serve_metrics(
        &mut self,
        pool: &ClientPool,
        background: &mut JoinSet<()>,
    ) -> Result<Option<SocketAddr>> {
        let Some(secure) = self.secure.take() else {
            return Ok(None);
        };
        let address = secure.address();
        let Some((_, access)) = pool.access().find(|(c, _)| *c == secure.context()) else {
            return Err(Error::SecureMetrics {
                address: address.to_string(),
                reason: format!("context {} has no client", secure.context()),
            });
        };
        background.spawn(secure.serve(access, self.registry.clone())?);
        Ok(Some(address))
    }

    /// Binds the webhook server, if asked for (serving waits for [`serve_webhooks`](Self::serve_webhooks)).
    pub(super) async fn bind_webhooks(
        &mut self,
        webhooks: Option<&Webhooks>,
        metrics: Option<WebhookMetrics>,
    ) -> Result<()> {
        if let (Some(webhooks), Some(metrics)) = (webhooks, metrics) {
            self.webhooks = Some(webhooks.bind(metrics).await?);
        }
        Ok(())
    }

    /// Starts the webhook server, if asked for, its handlers reading `runtime`'s caches; where it listens,
    /// and its self-signed certificate in PEM.
    pub(super) fn serve_webhooks(
        &mut self,
        runtime: &Arc<Runtime>,
        background: &mut JoinSet<()>,
    ) -> (Option<SocketAddr>, Option<String>) {
        let Some(webhooks) = self.webhooks.take() else {
            return (None, None);
        };
        let (address, ca_bundle) = (webhooks.address(), webhooks.ca_bundle());
        webhooks.serve(runtime.clone(), background);
        (Some(address), ca_bundle)
    }
}
