//! The CA every replica signs its serving certificate with, kept in a Secret of the control cluster: made
//! by the first replica that finds none, read by the others, so one `caBundle` trusts them all.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    PublicKeyData,
};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::server::ParsedCertificate;

use crate::core::chain;

/// The CA's subject: the issuer of every serving certificate it signs.
const CA_NAME: &str = "kubeplex webhook CA";

/// A CA's certificate and key, in PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Ca {
    pub(super) cert: String,
    key: String,
}

impl Ca {
    /// A new CA, signed by its own new key.
    pub(super) fn new() -> Result<Self, String> {
        let key = KeyPair::generate().map_err(|e| format!("making the CA's key: {e}"))?;
        let cert = ca_params()
            .self_signed(&key)
            .map_err(|e| format!("making the CA: {e}"))?;
        Ok(Self {
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }

    /// A serving certificate for `names`, signed by this CA, and its key, in PEM.
    pub(super) fn sign(&self, names: &[String]) -> Result<(String, String), String> {
        let ca_key = KeyPair::from_pem(&self.key).map_err(|e| format!("the CA's key: {e}"))?;
        // The issuer is named by the subject and identified by the key, both as the CA was made.
        let issuer = Issuer::new(ca_params(), ca_key);
        let key = KeyPair::generate().map_err(|e| format!("making a serving key: {e}"))?;
        let params = CertificateParams::new(names.to_vec()).map_err(|e| e.to_string())?;
        let cert = params
            .signed_by(&key, &issuer)
            .map_err(|e| format!("signing: {e}"))?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, CA_NAME);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params
}

/// The CA in Secret `namespace/name`, made and stored there if there is none; of two replicas that make
/// one at once, the one stored first wins and the other reads it. Why not, naming the Secret (never its
/// contents).
pub(super) async fn get_or_create(
    client: Client,
    namespace: &str,
    name: &str,
) -> Result<Ca, String> {
    let secrets: Api<Secret> = Api::namespaced(client, namespace);
    let place = format!("Secret {namespace}/{name}");
    for _ in 0..2 {
        match secrets.get_opt(name).await {
            Ok(Some(secret)) => return read(&secret).map_err(|why| format!("{place}: {why}")),
            Ok(None) => {}
            Err(error) => return Err(format!("{place}: {}", chain(&error))),
        }
        let ca = Ca::new()?;
        let data = [("tls.crt", &ca.cert), ("tls.key", &ca.key)]
            .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())));
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            data: Some(BTreeMap::from(data)),
            ..Default::default()
        };
        match secrets.create(&PostParams::default(), &secret).await {
            Ok(_) => return Ok(ca),
            // Another replica stored one first: read it.
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(error) => return Err(format!("{place}: {}", chain(&error))),
        }
    }
    Err(format!("{place}: made and taken away again"))
}

/// The CA in `secret`'s `tls.crt` and `tls.key`.
fn read(secret: &Secret) -> Result<Ca, String> {
    let field = |key: &str| {
        let value = secret.data.as_ref().and_then(|d| d.get(key));
        let value = value.ok_or_else(|| format!("no {key}"))?;
        String::from_utf8(value.0.clone()).map_err(|_| format!("{key} is not PEM"))
    };
    let ca = Ca {
        cert: field("tls.crt")?,
        key: field("tls.key")?,
    };
    let cert = CertificateDer::from_pem_slice(ca.cert.as_bytes())
        .map_err(|_| "tls.crt is not a PEM certificate")?;
    let cert = ParsedCertificate::try_from(&cert).map_err(|_| "tls.crt is no X.509 certificate")?;
    let key = KeyPair::from_pem(&ca.key).map_err(|_| "tls.key is not a PEM private key")?;
    // The key must be the certificate's, or every certificate signed with it would be refused by the
    // caBundle; their public keys are the same when it is.
    if key.subject_public_key_info() != cert.subject_public_key_info().as_ref() {
        return Err("tls.key is not the key of tls.crt".into());
    }
    Ok(ca)
}

#[cfg(test)]
mod tests {
    use rustls::client::danger::ServerCertVerifier;

    use super::*;

    #[test]
    fn a_certificate_the_ca_signs_is_trusted_by_its_bundle() {
        let ca = Ca::new().unwrap();
        let (cert, _) = ca.sign(&["localhost".into()]).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        use rustls::pki_types::pem::PemObject;
        let root = rustls::pki_types::CertificateDer::from_pem_slice(ca.cert.as_bytes()).unwrap();
        roots.add(root).unwrap();
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let verifier =
            rustls::client::WebPkiServerVerifier::builder_with_provider(roots.into(), provider)
                .build()
                .unwrap();
        let leaf = rustls::pki_types::CertificateDer::from_pem_slice(cert.as_bytes()).unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let now = rustls::pki_types::UnixTime::now();
        verifier
            .verify_server_cert(&leaf, &[], &name, &[], now)
            .unwrap();
    }

    fn secret_of(cert: &str, key: &str) -> Secret {
        let data = [("tls.crt", cert), ("tls.key", key)]
            .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())));
        Secret {
            data: Some(BTreeMap::from(data)),
            ..Default::default()
        }
    }

    #[test]
    fn a_secret_without_the_ca_s_files_is_named_never_quoted() {
        assert_eq!(read(&Secret::default()).unwrap_err(), "no tls.crt");
        let refused = read(&secret_of("secret words", "more secret words")).unwrap_err();
        assert!(!refused.contains("secret words"), "{refused}");
    }

    #[test]
    fn a_secret_whose_key_is_another_ca_s_is_refused() {
        let (ca, other) = (Ca::new().unwrap(), Ca::new().unwrap());
        assert_eq!(read(&secret_of(&ca.cert, &ca.key)), Ok(ca.clone()));
        assert_eq!(
            read(&secret_of(&ca.cert, &other.key)).unwrap_err(),
            "tls.key is not the key of tls.crt"
        );
    }
}
