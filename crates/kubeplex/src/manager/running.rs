//! A started manager: waiting for its contexts, its readiness, and its graceful shutdown.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::core::{Error, Result};
use crate::ha::Election;
use crate::readiness::ReadinessReport;
use crate::runtime::Runtime;

/// A started manager.
pub struct Running {
    /// Ends the pings when dropped.
    pub(crate) _pings: Arc<crate::readiness::Pings>,
    pub(crate) election: Election,
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) stop: watch::Sender<bool>,
    pub(crate) controllers: JoinSet<()>,
    pub(crate) background: JoinSet<()>,
    pub(crate) probe_address: Option<SocketAddr>,
    pub(crate) secure_metrics_address: Option<SocketAddr>,
    pub(crate) webhook_address: Option<SocketAddr>,
    pub(crate) webhook_ca_bundle: Option<String>,
}

impl Running {
    /// Resolves once every required context is ready (reachable, authorised, its kinds served and listed);
    /// fails at once, naming the context, when a required context cannot be configured at all.
    pub async fn wait_started(&self) -> Result<()> {
        let health = &self.runtime.readiness;
        // Once in full (no context at all is started at once); after that each look is O(1): the readiness
        // state keeps the count of required contexts not ready as it changes, so a thousand contexts that
        // change thousands of times while they start cost no report per change.
        let look = || {
            if health.has_fatal_errors() {
                return Some(Err(Error::Startup {
                    reasons: health.fatal_errors().join("; "),
                }));
            }
            health.is_started().then_some(Ok(()))
        };
        if health.report().started {
            return Ok(());
        }
        loop {
            let changed = health.changed();
            tokio::pin!(changed);
            // Enabled before the look, so a change made meanwhile is not missed.
            changed.as_mut().enable();
            if let Some(outcome) = look() {
                return outcome;
            }
            changed.await;
        }
    }

    /// The readiness of every cluster now, as the probes report it.
    pub fn readiness(&self) -> ReadinessReport {
        self.runtime.readiness.report()
    }

    /// Where the probe server listens, if it was asked for.
    pub fn probe_address(&self) -> Option<SocketAddr> {
        self.probe_address
    }

    /// Where the secure metrics server listens, if it was asked for
    /// ([`Manager::secure_metrics`](crate::Manager::secure_metrics)).
    pub fn secure_metrics_address(&self) -> Option<SocketAddr> {
        self.secure_metrics_address
    }

    /// Where the webhook server listens, if it was asked for ([`Manager::webhooks`](crate::Manager::webhooks)).
    pub fn webhook_address(&self) -> Option<SocketAddr> {
        self.webhook_address
    }

    /// The webhook server's self-signed certificate in PEM: the `caBundle` of the webhook configurations
    /// and of the CRD's conversion that call it. `None` without webhooks or with a certificate directory.
    pub fn webhook_ca_bundle(&self) -> Option<&str> {
        self.webhook_ca_bundle.as_deref()
    }

    /// How many watches the manager opened: one per distinct (cluster, kind, namespace, selectors),
    /// however many controllers share it.
    pub fn watches_opened(&self) -> usize {
        self.runtime.watches.opened()
    }

    /// Stops taking new reconciles, waits for those in flight, then ends the watches and the servers.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        while self.controllers.join_next().await.is_some() {}
        // The reconciles in flight have finished: the Lease can go to a successor now.
        self.election.end().await;
        self.runtime.watches.shutdown();
        self.background.shutdown().await;
    }
}
