//! A context's TLS settings, read once.

use hyper_rustls::{FixedServerNameResolver, HttpsConnector, HttpsConnectorBuilder};
use kube::client::ConfigExt;

use crate::core::chain;

/// The TLS settings of a context, read once: building them may run an exec plugin (a client certificate)
/// and read files, which a request must not wait for.
pub(crate) struct Tls {
    config: rustls::ClientConfig,
    server_name: Option<rustls::pki_types::ServerName<'static>>,
}

impl Tls {
    /// The settings `config` gives, or why they cannot be used.
    pub(crate) fn of(config: &kube::Config) -> Result<Self, String> {
        let server_name = match &config.tls_server_name {
            None => None,
            Some(name) => Some(
                rustls::pki_types::ServerName::try_from(name.clone())
                    .map_err(|e| format!("tls-server-name {name}: {e}"))?,
            ),
        };
        Ok(Self {
            config: config.rustls_client_config().map_err(|e| chain(&e))?,
            server_name,
        })
    }

    /// As kube's `rustls_https_connector_with_connector`, from the settings read once.
    pub(crate) fn over<C>(&self, connector: C) -> HttpsConnector<C> {
        let builder = HttpsConnectorBuilder::new()
            .with_tls_config(self.config.clone())
            .https_or_http();
        let builder = match &self.server_name {
            Some(name) => {
                builder.with_server_name_resolver(FixedServerNameResolver::new(name.clone()))
            }
            None => builder,
        };
        builder.enable_http1().wrap_connector(connector)
    }
}
