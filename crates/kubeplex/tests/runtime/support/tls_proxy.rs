//! A TLS-terminating proxy in front of an API server, as a load balancer may be: it offers the ALPN
//! protocols it is given, records what each client offered and what was agreed, and speaks the agreed
//! protocol to the server on a TLS connection of its own (so only bearer tokens pass it, not client
//! certificates).

use std::sync::Arc;

use parking_lot::Mutex;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ServerConfig};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{LazyConfigAcceptor, TlsConnector};

/// One connection a client made through the proxy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// The ALPN protocols the client offered, in its order.
    pub offered: Vec<String>,
    /// The protocol agreed on, if any.
    pub agreed: Option<String>,
}

/// The proxy, serving until dropped.
pub struct TlsProxy {
    /// Where clients connect: `https://localhost:<port>`.
    pub url: String,
    /// The PEM of the authority that signed its certificate (for `localhost`).
    pub ca_pem: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    serving: tokio::task::JoinHandle<()>,
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        self.serving.abort();
    }
}

impl TlsProxy {
    /// A proxy to the API server at `server` (an `https://` URL) whose certificate `server_ca_pem` signed,
    /// offering clients the ALPN protocols `offer`.
    pub async fn start(server: &str, server_ca_pem: &[u8], offer: &[&str]) -> Self {
        let (ca_cert, serving, key) = super::certificates::localhost();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap();
        let mut served = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![serving.der().clone()], key)
            .unwrap();
        served.alpn_protocols = offer.iter().map(|p| p.as_bytes().to_vec()).collect();
        let mut roots = rustls::RootCertStore::empty();
        for certificate in CertificateDer::pem_slice_iter(server_ca_pem) {
            roots.add(certificate.unwrap()).unwrap();
        }
        let upstream = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let target: http::Uri = server.parse().unwrap();
        let host = target.host().unwrap().to_owned();
        let address = format!("{host}:{}", target.port_u16().unwrap_or(443));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let relay = Relay {
            served: Arc::new(served),
            upstream,
            host,
            address,
            seen: seen.clone(),
        };
        let serving = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let relay = relay.clone();
                tokio::spawn(async move { relay.carry(client).await });
            }
        });
        Self {
            url: format!("https://localhost:{port}"),
            ca_pem: ca_cert.pem(),
            seen,
            serving,
        }
    }

    /// Every connection made through it so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().clone()
    }
}

/// What each connection is carried with.
#[derive(Clone)]
struct Relay {
    served: Arc<ServerConfig>,
    upstream: ClientConfig,
    host: String,
    address: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Relay {
    /// Terminates the client's TLS, and carries its bytes to the server over TLS with the agreed protocol.
    async fn carry(self, client: TcpStream) {
        let acceptor = rustls::server::Acceptor::default();
        let Ok(start) = LazyConfigAcceptor::new(acceptor, client).await else {
            return;
        };
        let alpn = start.client_hello().alpn();
        let offered: Vec<String> = alpn
            .into_iter()
            .flatten()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        let Ok(mut client) = start.into_stream(self.served.clone()).await else {
            return;
        };
        let agreed = client.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        let agreed_text = agreed
            .as_ref()
            .map(|p| String::from_utf8_lossy(p).into_owned());
        self.seen.lock().push(Seen {
            offered,
            agreed: agreed_text,
        });
        let mut upstream = self.upstream.clone();
        upstream.alpn_protocols = agreed.into_iter().collect();
        let connector = TlsConnector::from(Arc::new(upstream));
        let Ok(tcp) = TcpStream::connect(&self.address).await else {
            return;
        };
        let name = ServerName::try_from(self.host.clone()).unwrap();
        let Ok(mut server) = connector.connect(name, tcp).await else {
            return;
        };
        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
    }
}
