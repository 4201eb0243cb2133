//! How a context is reached: its configuration, and its credentials read once — TLS settings and the
//! requests' authorization — shared by every client of the context.
//!
//! The controllers' client, the pings' and the leases' clients share them, so the pings judge the
//! credential the controllers use (a ping that ran an exec plugin afresh would find the cluster answering
//! while the controllers' token is refused), and a token renewed after a 401 on one client is every
//! client's.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;

use super::authorization::{Authorization, RENEW_AT_MOST_EVERY};
use super::fence::Fence;
use super::tls::Tls;

/// A context's configuration and credentials.
#[derive(Clone)]
pub(crate) struct Access {
    config: Arc<kube::Config>,
    pub(super) tls: Arc<Tls>,
    pub(super) authorization: Arc<Authorization>,
}

impl Access {
    /// The access `config` gives `context` (an exec plugin is run now), or why it gives none.
    pub(crate) fn of(context: &str, config: kube::Config) -> Result<Self, String> {
        Self::renewing_every(context, config, RENEW_AT_MOST_EVERY)
    }

    /// As [`of`](Self::of), with an exec plugin run again after a 401 at most every `every`.
    pub(super) fn renewing_every(
        context: &str,
        config: kube::Config,
        every: Duration,
    ) -> Result<Self, String> {
        let tls = Tls::of(&config)?;
        let authorization = Authorization::of(context, &config, every)?;
        Ok(Self {
            config: Arc::new(config),
            tls: Arc::new(tls),
            authorization: Arc::new(authorization),
        })
    }

    /// The context's configuration.
    pub(crate) fn config(&self) -> &kube::Config {
        &self.config
    }

    /// A client of its own, with its own connections and no fence, on the context's credentials (the
    /// pings' and the leases' clients).
    pub(crate) fn own_client(&self) -> Result<Client, String> {
        super::transport::client(self, &Fence::default())
    }
}
