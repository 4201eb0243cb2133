//! The manager's HTTP servers: the probe server, and the secure metrics server when asked for, which
//! takes `/metrics` off the probe port.

use std::net::SocketAddr;
use std::sync::Arc;

use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::client::ClientPool;
use crate::core::{Error, Result};
use crate::readiness::{BoundSecureMetrics, Readiness, SecureMetrics};

/// The servers, bound before any cluster is contacted, so that a taken port fails the start at once.
pub(super) struct Servers {
    pub(super) probe_address: Option<SocketAddr>,
    secure: Option<BoundSecureMetrics>,
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
            registry,
        })
    }

    /// Starts the secure metrics server, if asked for, now that its context has a client in `pool`;
    /// where it listens.
    pub(super) fn serve_metrics(
        self,
        pool: &ClientPool,
        background: &mut JoinSet<()>,
    ) -> Result<Option<SocketAddr>> {
        let Some(secure) = self.secure else {
            return Ok(None);
        };
        let address = secure.address();
        let Some((_, access)) = pool.access().find(|(c, _)| *c == secure.context()) else {
            return Err(Error::SecureMetrics {
                address: address.to_string(),
                reason: format!("context {} has no client", secure.context()),
            });
        };
        background.spawn(secure.serve(access, self.registry)?);
        Ok(Some(address))
    }
}
