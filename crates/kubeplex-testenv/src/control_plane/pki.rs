//! Certificates and credentials of one simulated cluster: its own CA, serving certificate, and users.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::error::{Error, Result};

/// A certificate and its private key, PEM-encoded.
#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
pub(crate) struct CertifiedKey {
    pub(crate) cert_pem: String,
    pub(crate) key_pem: String,
}

/// Everything secret a cluster needs, generated fresh for each environment.
#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
pub(crate) struct ClusterPki {
    /// The CA that signed the serving certificate and the client certificates.
    pub(crate) ca: CertifiedKey,
    /// The API server's serving certificate, for 127.0.0.1 and localhost.
    pub(super) serving: CertifiedKey,
    /// `admin` in group `system:masters`: may do everything.
    pub(crate) admin: CertifiedKey,
    /// `kubeplex-testenv:no-permissions`: authenticates, but no RBAC rule grants it anything (403).
    pub(crate) no_permissions: CertifiedKey,
    /// The key service-account tokens are signed with (the API server insists on one).
    pub(super) service_account_key: CertifiedKey,
    /// `system:kube-controller-manager` in group `system:masters`, for a cluster that runs one: its own
    /// name in audit logs, and every right its controllers need with one client.
    pub(super) controller_manager: Option<CertifiedKey>,
}

/// The user name the no-permission credential authenticates as.
pub const NO_PERMISSIONS_USER: &str = "kubeplex-testenv:no-permissions";

impl ClusterPki {
    /// Everything for `cluster`; the controller manager's certificate only when it runs one.
    pub(super) fn generate(cluster: &str, controller_manager: bool) -> Result<Self> {
        let pki = |e: rcgen::Error| Error::Pki(format!("cluster {cluster}: {e}"));
        let ca_key = KeyPair::generate().map_err(pki)?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(pki)?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        ca_params
            .distinguished_name
            .push(DnType::CommonName, format!("kubeplex-testenv {cluster} CA"));
        let ca_cert = ca_params.self_signed(&ca_key).map_err(pki)?;
        let ca = CertifiedKey {
            cert_pem: ca_cert.pem(),
            key_pem: ca_key.serialize_pem(),
        };
        let issuer = Issuer::new(ca_params, ca_key);

        let leaf = |names: Vec<String>,
                    common_name: &str,
                    organization: Option<&str>,
                    usage|
         -> Result<CertifiedKey> {
            let key = KeyPair::generate().map_err(pki)?;
            let mut params = CertificateParams::new(names).map_err(pki)?;
            params
                .distinguished_name
                .push(DnType::CommonName, common_name);
            if let Some(organization) = organization {
                params
                    .distinguished_name
                    .push(DnType::OrganizationName, organization);
            }
            params.key_usages = vec![
                KeyUsagePurpose::DigitalSignature,
                KeyUsagePurpose::KeyEncipherment,
            ];
            params.extended_key_usages = vec![usage];
            let cert = params.signed_by(&key, &issuer).map_err(pki)?;
            Ok(CertifiedKey {
                cert_pem: cert.pem(),
                key_pem: key.serialize_pem(),
            })
        };
        let serving = leaf(
            vec!["127.0.0.1".into(), "localhost".into()],
            "kube-apiserver",
            None,
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        let admin = leaf(
            vec![],
            "admin",
            Some("system:masters"),
            ExtendedKeyUsagePurpose::ClientAuth,
        )?;
        let no_permissions = leaf(
            vec![],
            NO_PERMISSIONS_USER,
            None,
            ExtendedKeyUsagePurpose::ClientAuth,
        )?;
        let controller_manager = if controller_manager {
            Some(leaf(
                vec![],
                "system:kube-controller-manager",
                Some("system:masters"),
                ExtendedKeyUsagePurpose::ClientAuth,
            )?)
        } else {
            None
        };
        let sa_key = KeyPair::generate().map_err(pki)?;
        let service_account_key = CertifiedKey {
            cert_pem: sa_key.public_key_pem(),
            key_pem: sa_key.serialize_pem(),
        };
        Ok(Self {
            ca,
            serving,
            admin,
            no_permissions,
            service_account_key,
            controller_manager,
        })
    }
}
