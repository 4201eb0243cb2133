//! The certificate a TLS port presents (the secure metrics port, the webhook server): `tls.crt` and
//! `tls.key` from a directory (as a `kubernetes.io/tls` Secret, e.g. cert-manager's, mounts them), else one
//! signed by itself, made at start; for the webhook server, the directory's read again when it changes.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// The names a certificate made at start is for (besides any asked for): a scraper that checks one signed
/// by itself would have to pin it anyway.
pub(crate) const SELF_SIGNED_NAMES: [&str; 2] = ["localhost", "127.0.0.1"];

/// The TLS settings of the secure metrics port: the certificate in `cert_dir` (`tls.crt`, the chain, and
/// `tls.key`), else a new one signed by itself; HTTP/1.1 only. Why not, in words naming the file.
pub(super) fn server_config(cert_dir: Option<&Path>) -> Result<ServerConfig, String> {
    let (chain, key) = match cert_dir {
        Some(dir) => from_dir(dir)?,
        None => self_signed(&[]).map(|(chain, key, _)| (chain, key))?,
    };
    with_certificate(chain, key)
}

/// The TLS settings of a server presenting `chain` with `key`; HTTP/1.1 only.
fn with_certificate(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<ServerConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("the certificate and its key do not go together: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The TLS settings of a server whose certificate is `tls.crt` and `tls.key` in `dir`, read now and again
/// every `every` while the returned task runs, when either file changed (cert-manager renews by replacing
/// the Secret's files); a file that cannot be read then leaves the last good certificate served, and is
/// logged once. HTTP/1.1 only.
pub(crate) fn reloading(
    dir: PathBuf,
    every: Duration,
) -> Result<(ServerConfig, impl Future<Output = ()> + Send + 'static), String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let load = {
        let provider = provider.clone();
        move |dir: &Path| -> Result<Arc<CertifiedKey>, String> {
            let (chain, key) = from_dir(dir)?;
            let certified = CertifiedKey::from_der(chain, key, &provider)
                .map_err(|e| format!("the certificate and its key do not go together: {e}"))?;
            Ok(Arc::new(certified))
        }
    };
    let stamp = |dir: &Path| {
        ["tls.crt", "tls.key"].map(|f| {
            std::fs::metadata(dir.join(f))
                .ok()
                .map(|m| (m.modified().ok(), m.len()))
        })
    };
    let mut seen = stamp(&dir);
    let resolver = Arc::new(Reloading(RwLock::new(load(&dir)?)));
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_cert_resolver(resolver.clone());
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let watch = async move {
        let mut failing = false;
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let now = stamp(&dir);
            if now == seen {
                continue;
            }
            match load(&dir) {
                Ok(certified) => {
                    *resolver.0.write() = certified;
                    seen = now;
                    failing = false;
                    tracing::info!(dir = %dir.display(), "serving the renewed certificate");
                }
                // Half-written files are read again at the next tick; a lasting problem is logged once.
                Err(problem) if !failing => {
                    failing = true;
                    tracing::warn!(dir = %dir.display(), %problem, "the certificate's files changed and cannot be read; serving the last good one");
                }
                Err(_) => {}
            }
        }
    };
    Ok((config, watch))
}

/// The certificate served now; swapped when the files change.
#[derive(Debug)]
struct Reloading(RwLock<Arc<CertifiedKey>>);

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().clone())
    }
}

/// The certificate of a server that has none yet (it is signed once a cluster answers): handshakes fail
/// until [`set`](Self::set).
#[derive(Debug, Default)]
pub(crate) struct LaterCertificate(RwLock<Option<Arc<CertifiedKey>>>);

impl LaterCertificate {
    /// Serves `chain` (PEM) with `key` (PEM) from now on.
    pub(crate) fn set(&self, chain: &str, key: &str) -> Result<(), String> {
        let chain = CertificateDer::pem_slice_iter(chain.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("the certificate: {e}"))?;
        let key =
            PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|e| format!("its key: {e}"))?;
        let provider = rustls::crypto::ring::default_provider();
        let certified = CertifiedKey::from_der(chain, key, &provider)
            .map_err(|e| format!("the certificate and its key do not go together: {e}"))?;
        *self.0.write() = Some(Arc::new(certified));
        Ok(())
    }
}

impl ResolvesServerCert for LaterCertificate {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.0.read().clone()
    }
}

/// The TLS settings of a server whose certificate comes later, and where it goes. HTTP/1.1 only.
pub(crate) fn later() -> Result<(ServerConfig, Arc<LaterCertificate>), String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let later = Arc::new(LaterCertificate::default());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_cert_resolver(later.clone());
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((config, later))
}

/// The TLS settings of a server with a new certificate for `localhost`, `127.0.0.1` and `names`, signed by
/// its own new key, and that certificate in PEM (what a client that trusts it, such as an API server
/// calling a webhook, is given as its `caBundle`). HTTP/1.1 only.
pub(crate) fn self_signed_for(names: &[String]) -> Result<(ServerConfig, String), String> {
    let (chain, key, pem) = self_signed(names)?;
    Ok((with_certificate(chain, key)?, pem))
}

/// `tls.crt` and `tls.key` of `dir`.
fn from_dir(dir: &Path) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let (crt, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    let unreadable = |path: &Path, e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let chain = CertificateDer::pem_file_iter(&crt)
        .and_then(|certificates| certificates.collect::<Result<Vec<_>, _>>())
        .map_err(|e| unreadable(&crt, &e))?;
    if chain.is_empty() {
        return Err(unreadable(&crt, &"no PEM certificate in it"));
    }
    // The error names the file and what is wrong with it, never the key's bytes.
    let key = PrivateKeyDer::from_pem_file(&key).map_err(|e| unreadable(&key, &e))?;
    Ok((chain, key))
}

/// A certificate for [`SELF_SIGNED_NAMES`] and `names`, signed by its own new key, with its PEM.
fn self_signed(
    names: &[String],
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>, String), String> {
    let mut all = SELF_SIGNED_NAMES.map(str::to_owned).to_vec();
    all.extend(names.iter().cloned());
    let made = rcgen::generate_simple_self_signed(all)
        .map_err(|e| format!("making a self-signed certificate: {e}"))?;
    let key = PrivatePkcs8KeyDer::from(made.signing_key.serialize_der());
    Ok((vec![made.cert.der().clone()], key.into(), made.cert.pem()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_certificate_when_no_directory_is_given() {
        let config = server_config(None).unwrap();
        assert_eq!(config.alpn_protocols, [b"http/1.1".to_vec()]);
    }

    #[test]
    fn a_directory_without_the_files_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let error = server_config(Some(dir.path())).unwrap_err();
        assert!(error.contains("tls.crt"), "{error}");
    }

    #[test]
    fn the_directory_s_certificate_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let made = rcgen::generate_simple_self_signed(vec!["metrics.example".into()]).unwrap();
        std::fs::write(dir.path().join("tls.crt"), made.cert.pem()).unwrap();
        std::fs::write(dir.path().join("tls.key"), "not a key").unwrap();
        let error = server_config(Some(dir.path())).unwrap_err();
        assert!(error.contains("tls.key"), "{error}");
        assert!(!error.contains("not a key"), "{error}");
        std::fs::write(dir.path().join("tls.key"), made.signing_key.serialize_pem()).unwrap();
        server_config(Some(dir.path())).unwrap();
    }

    /// The certificate a server with `config` presents in a handshake, trusting `roots`.
    async fn presented(config: &Arc<ServerConfig>, roots: &[&rcgen::Certificate]) -> Vec<u8> {
        let mut store = rustls::RootCertStore::empty();
        for root in roots {
            store.add(root.der().clone()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(store)
            .with_no_client_auth();
        let (near, far) = tokio::io::duplex(64 * 1024);
        let server = tokio_rustls::TlsAcceptor::from(config.clone());
        let accepted = tokio::spawn(async move { server.accept(far).await.map(|_| ()) });
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let stream = connector.connect(name, near).await.unwrap();
        accepted.await.unwrap().unwrap();
        let (_, connection) = stream.get_ref();
        connection.peer_certificates().unwrap()[0].to_vec()
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewed_certificate_in_the_directory_is_served_without_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let write = |made: &rcgen::CertifiedKey<rcgen::KeyPair>| {
            std::fs::write(dir.path().join("tls.crt"), made.cert.pem()).unwrap();
            std::fs::write(dir.path().join("tls.key"), made.signing_key.serialize_pem()).unwrap();
        };
        let first = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        write(&first);
        let every = Duration::from_secs(10);
        let (config, watch) = reloading(dir.path().to_owned(), every).unwrap();
        let (config, watch) = (Arc::new(config), tokio::spawn(watch));
        let roots = [&first.cert];
        assert_eq!(presented(&config, &roots).await, first.cert.der().to_vec());

        // Half written: the key is not the certificate's yet. The last good one is served meanwhile.
        let second = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        std::fs::write(dir.path().join("tls.crt"), second.cert.pem()).unwrap();
        tokio::time::sleep(every * 2).await;
        let roots = [&first.cert, &second.cert];
        assert_eq!(presented(&config, &roots).await, first.cert.der().to_vec());
        write(&second);
        tokio::time::sleep(every * 2).await;
        assert_eq!(presented(&config, &roots).await, second.cert.der().to_vec());
        watch.abort();
    }
}
