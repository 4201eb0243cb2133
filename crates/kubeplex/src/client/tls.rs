//! A cluster's TLS settings, read once.

use std::sync::Arc;

use hyper_rustls::{
    DefaultServerNameResolver, FixedServerNameResolver, HttpsConnector, ResolveServerName,
};
use kube::client::ConfigExt;

use super::no_access::NoAccess;

/// The servers whose TLS sessions a cluster's connections resume. A cluster talks to one API server (one
/// server name), so a few are plenty; rustls' default of 256 reserves about 15 KB per cluster up front,
/// a sixth of what an idle cluster costs.
const SESSIONS_CACHED: usize = 4;

/// The TLS settings of a cluster, read once: building them may read files, which a request must not wait
/// for (an exec plugin's client certificate is had before, by kubeplex). Every connection pool of the
/// cluster holds the same `ClientConfig` (its verifier, certificates and session cache), not a copy each.
pub(crate) struct Tls {
    /// Offering HTTP/2 (ALPN `h2`, then `http/1.1`), or, [`http1_only`](Self::http1_only), no ALPN.
    config: Arc<rustls::ClientConfig>,
    server_name: Arc<dyn ResolveServerName + Send + Sync>,
}

impl Tls {
    /// The settings `config` gives, or why they cannot be used: a certificate authority with
    /// `insecure-skip-tls-verify` is refused, as client-go refuses it (kube would drop the authority
    /// without a word).
    pub(crate) fn of(config: &kube::Config) -> Result<Self, NoAccess> {
        if config.accept_invalid_certs && config.root_cert.is_some() {
            return Err(NoAccess::from(
                "insecure-skip-tls-verify is set together with a certificate authority \
                 (certificate-authority-data or certificate-authority); one of them must go, as client-go \
                 refuses the pair"
                    .to_owned(),
            ));
        }
        let server_name: Arc<dyn ResolveServerName + Send + Sync> = match &config.tls_server_name {
            None => Arc::new(DefaultServerNameResolver::default()),
            Some(name) => Arc::new(FixedServerNameResolver::new(
                rustls::pki_types::ServerName::try_from(name.clone())
                    .map_err(|e| format!("tls-server-name {name}: {e}"))?,
            )),
        };
        let mut tls = config
            .rustls_client_config()
            .map_err(|e| NoAccess::of(&e))?;
        tls.resumption = rustls::client::Resumption::in_memory_sessions(SESSIONS_CACHED);
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Self {
            config: Arc::new(tls),
            server_name,
        })
    }

    /// The same settings never offering HTTP/2: every connection speaks HTTP/1.1.
    pub(crate) fn http1_only(&self) -> Self {
        // A clone shares the session cache.
        let mut config = (*self.config).clone();
        config.alpn_protocols = Vec::new();
        Self {
            config: Arc::new(config),
            server_name: self.server_name.clone(),
        }
    }

    /// Whether its connections offer HTTP/2.
    pub(crate) fn offers_http2(&self) -> bool {
        self.config.alpn_protocols.iter().any(|p| p == b"h2")
    }

    /// What makes `config`'s connections open to whoever is on the way, in words: `insecure-skip-tls-verify`,
    /// or a plain `http://` server.
    pub(crate) fn insecurity(config: &kube::Config) -> Option<&'static str> {
        if config.cluster_url.scheme_str() == Some("http") {
            Some(
                "the server is plain http://: requests and credentials cross the network unencrypted",
            )
        } else if config.accept_invalid_certs {
            Some("insecure-skip-tls-verify is set: the server's certificate is not verified")
        } else {
            None
        }
    }

    /// As kube's `rustls_https_connector_with_connector` (`http` URLs allowed), from the settings read once:
    /// offering HTTP/2 first (a server that does not speak it gets HTTP/1.1), unless HTTP/1.1 only.
    pub(crate) fn over<C>(&self, connector: C) -> HttpsConnector<C> {
        HttpsConnector::new(
            connector,
            self.config.clone(),
            false,
            self.server_name.clone(),
        )
    }
}
