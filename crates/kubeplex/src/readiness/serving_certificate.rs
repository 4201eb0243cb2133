//! The certificate the secure metrics port presents: `tls.crt` and `tls.key` from a directory (as a
//! `kubernetes.io/tls` Secret, e.g. cert-manager's, mounts them), else one signed by itself, made at start.

use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The names a certificate signed by itself is for: a scraper that checks it would have to pin it anyway.
const SELF_SIGNED_NAMES: [&str; 2] = ["localhost", "127.0.0.1"];

/// The TLS settings of the secure metrics port: the certificate in `cert_dir` (`tls.crt`, the chain, and
/// `tls.key`), else a new one signed by itself; HTTP/1.1 only. Why not, in words naming the file.
pub(super) fn server_config(cert_dir: Option<&Path>) -> Result<ServerConfig, String> {
    let (chain, key) = match cert_dir {
        Some(dir) => from_dir(dir)?,
        None => self_signed()?,
    };
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

/// A new certificate for [`SELF_SIGNED_NAMES`], signed by its own new key.
fn self_signed() -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let names = SELF_SIGNED_NAMES.map(str::to_owned).to_vec();
    let made = rcgen::generate_simple_self_signed(names)
        .map_err(|e| format!("making a self-signed certificate: {e}"))?;
    let key = PrivatePkcs8KeyDer::from(made.signing_key.serialize_der());
    Ok((vec![made.cert.der().clone()], key.into()))
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
}
