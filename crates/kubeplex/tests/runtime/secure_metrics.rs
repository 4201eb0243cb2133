//! Secure metrics on a real API server: `/metrics` over HTTPS, each scrape's bearer token reviewed
//! (TokenReview, SubjectAccessReview) by the control cluster. The operator runs as a ServiceAccount with
//! only the RBAC `Manager::rbac` derives; the scrapers are ServiceAccounts with tokens from the
//! TokenRequest API, one bound to the metrics-reader ClusterRole `Manager::rbac` offers, one not.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::support::{Fleet, WAIT, create_namespace};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleRef, Subject};
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use kubeplex::{Manager, SecureMetrics};
use kubeplex_testenv::HTTP_LIMIT;
use kubeplex_testenv::eventually;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsConnector;

const NAMESPACE: &str = "secure-metrics";
const OPERATOR: &str = "operator";
const READER: &str = "prometheus";
const STRANGER: &str = "stranger";

/// A CA, and a serving certificate for `localhost` it signed, in a directory as `tls.crt` and `tls.key`.
fn certificates() -> (tempfile::TempDir, CertificateDer<'static>) {
    let (ca_cert, serving, key) = crate::support::certificates::localhost();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tls.crt"), serving.pem()).unwrap();
    std::fs::write(dir.path().join("tls.key"), key.serialize_pem()).unwrap();
    (dir, ca_cert.der().clone())
}

/// A client that trusts `ca`.
fn trusting(ca: &CertificateDer<'static>) -> Arc<ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

/// A client that takes any certificate (one signed by itself, made at start), as a scraper configured
/// with `insecureSkipVerify`; the handshake's signatures are still checked.
fn trusting_any() -> Arc<ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(AnyCertificate(provider.clone()));
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Arc::new(config)
}

#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signed: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, certificate, signed, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signed: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, certificate, signed, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// GET `/metrics` over HTTPS as `client` for `localhost`, with `authorization` as the header if given;
/// the status code and the body. Fails the test after [`HTTP_LIMIT`].
async fn scrape(
    address: SocketAddr,
    client: &Arc<ClientConfig>,
    authorization: Option<&str>,
) -> (u16, String) {
    let exchange = async {
        let tcp = tokio::net::TcpStream::connect(address).await?;
        let name = ServerName::try_from("localhost").unwrap();
        let mut tls = TlsConnector::from(client.clone())
            .connect(name, tcp)
            .await?;
        let header = authorization
            .map(|value| format!("Authorization: {value}\r\n"))
            .unwrap_or_default();
        let request = format!(
            "GET /metrics HTTP/1.1\r\nHost: localhost\r\n{header}Connection: close\r\n\r\n"
        );
        tls.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        // A peer that closes without TLS's close_notify still sent the whole response first.
        match tls.read_to_end(&mut response).await {
            Err(e) if e.kind() != std::io::ErrorKind::UnexpectedEof => return Err(e),
            _ => {}
        }
        std::io::Result::Ok(String::from_utf8_lossy(&response).into_owned())
    };
    let response = match tokio::time::timeout(HTTP_LIMIT, exchange).await {
        Ok(Ok(response)) => response,
        Ok(Err(error)) => panic!("GET /metrics on {address}: {error}"),
        Err(_) => panic!("GET /metrics on {address}: no whole answer within {HTTP_LIMIT:?}"),
    };
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
    let code = head.split(' ').nth(1).and_then(|c| c.parse().ok());
    (code.expect("a status code"), body.to_owned())
}

async fn create<K>(client: &Client, object: K)
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    Api::<K>::all(client.clone())
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
}

/// Binds the ClusterRole `role` to the ServiceAccount `name` of [`NAMESPACE`].
fn binding(name: &str, role: &str) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(format!("{name}-{role}")),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: String::from("rbac.authorization.k8s.io").into(),
            kind: "ClusterRole".into(),
            name: role.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: name.into(),
            namespace: Some(NAMESPACE.into()),
            ..Subject::default()
        }]),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrapes_are_authenticated_and_authorised_by_the_control_cluster() {
    let env = crate::support::clusters([]).await;
    let admin = env.client("control").await.unwrap();
    create_namespace(&admin, NAMESPACE).await;
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), NAMESPACE);
    for name in [OPERATOR, READER, STRANGER] {
        let account = ServiceAccount {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            ..ServiceAccount::default()
        };
        accounts
            .create(&PostParams::default(), &account)
            .await
            .unwrap();
    }
    // The operator's RBAC and the reader's role, as the manager derives them.
    let (dir, ca) = certificates();
    let secure = SecureMetrics::new(Fleet::Control, "127.0.0.1:0").cert_dir(dir.path());
    let manager = |kubeconfig| {
        Manager::with_kubeconfig(kubeconfig)
            .probes("127.0.0.1:0")
            .secure_metrics(secure.clone())
    };
    let rbac = manager(Default::default())
        .rbac(OPERATOR, NAMESPACE)
        .for_context("control");
    for role in rbac.cluster_roles {
        create::<ClusterRole>(&admin, role).await;
    }
    for binding in rbac.cluster_role_bindings {
        create(&admin, binding).await;
    }
    let reader = rbac.metrics_reader.expect("a metrics-reader role");
    let reader_name = reader.metadata.name.clone().unwrap();
    create(&admin, reader).await;
    create(&admin, binding(READER, &reader_name)).await;

    let token = |name| env.service_account_token("control", NAMESPACE, name);
    let operator = env
        .kubeconfig_with_tokens(&[("control", &token(OPERATOR).await.unwrap())])
        .unwrap();
    let running = manager(operator.clone()).start().await.unwrap();
    let ca = trusting(&ca);
    let address = running.secure_metrics_address().expect("secure metrics");

    // No token, a token the API server does not know, a user without the role, and the reader.
    assert_eq!(scrape(address, &ca, None).await.0, 401);
    let garbage = scrape(address, &ca, Some("Bearer not-a-token")).await;
    assert_eq!(garbage.0, 401, "{}", garbage.1);
    let basic = scrape(address, &ca, Some("Basic b3BlcmF0b3I6c2VjcmV0")).await;
    assert_eq!(basic.0, 401, "{}", basic.1);
    let stranger = format!("Bearer {}", token(STRANGER).await.unwrap());
    let reader = format!("Bearer {}", token(READER).await.unwrap());
    // The operator's own binding may take a moment to count: until then a review fails (503).
    let body = eventually("the reader scrapes", WAIT, async || {
        match scrape(address, &ca, Some(&reader)).await {
            (200, body) => Ok(body),
            (code, body) => Err(format!("{code}: {body}")),
        }
    })
    .await;
    assert!(body.contains("kubeplex_cluster_up"), "{body}");
    assert!(body.ends_with("# EOF\n"), "{body}");
    let refused = scrape(address, &ca, Some(&stranger)).await;
    assert_eq!(refused.0, 403, "{}", refused.1);
    assert!(
        refused
            .1
            .contains("system:serviceaccount:secure-metrics:stranger"),
        "{}",
        refused.1
    );

    // The probe port serves the probes, and no longer the metrics.
    let probes = running.probe_address().unwrap();
    let metrics = crate::support::http_get(probes, "/metrics").await;
    assert_eq!(metrics.code, 404, "{metrics:?}");
    let livez = crate::support::http_get(probes, "/livez").await;
    assert_eq!(livez.code, 200, "{livez:?}");

    // A client that connects and never starts TLS is let go.
    let mut idle = tokio::net::TcpStream::connect(address).await.unwrap();
    let closed = tokio::time::timeout(Duration::from_secs(30), idle.read(&mut [0; 1])).await;
    assert!(
        matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
        "still open: {closed:?}"
    );
    crate::support::stop(running).await;

    // Without a certificate directory, one signed by itself.
    let running = Manager::with_kubeconfig(operator)
        .secure_metrics(SecureMetrics::new(Fleet::Control, "127.0.0.1:0"))
        .start()
        .await
        .unwrap();
    let address = running.secure_metrics_address().unwrap();
    let (code, body) = scrape(address, &trusting_any(), Some(&reader)).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(scrape(address, &trusting_any(), None).await.0, 401);
    crate::support::stop(running).await;
}
