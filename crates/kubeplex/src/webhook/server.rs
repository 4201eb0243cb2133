//! The webhook server: bound with its certificate before any cluster is contacted, serving once the
//! manager's caches exist, on every replica (admission does not wait for leadership).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use super::ca;
use super::ca_bundle::{self, Registration};
use super::router::{Served, router};
use super::webhooks::{Certificate, Webhooks};
use crate::core::{Error, LogThrottle};
use crate::executor::RetryBackoff;
use crate::metrics::WebhookMetrics;
use crate::readiness::{
    LaterCertificate, SELF_SIGNED_NAMES, later_certificate, reloading_certificate, self_signed_for,
    serve_connections,
};
use crate::runtime::Runtime;

/// How often a certificate directory is looked at for renewed files.
const CERTIFICATE_CHECK: Duration = Duration::from_secs(10);

/// The webhook server, bound, with its certificate, not yet serving.
pub(crate) struct BoundWebhooks {
    settings: Webhooks,
    listener: TcpListener,
    address: SocketAddr,
    tls: TlsAcceptor,
    /// The self-signed certificate in PEM, for the configurations' `caBundle`.
    ca_bundle: Option<String>,
    /// Reads a certificate directory again when it changes.
    reload: Option<BoxFuture<'static, ()>>,
    /// Where the certificate signed by the CA in a Secret goes, once signed.
    signed_later: Option<Arc<LaterCertificate>>,
    metrics: WebhookMetrics,
}

impl Webhooks {
    /// Binds the address and reads (or makes) the certificate; `metrics` counts the requests.
    pub(crate) async fn bind(&self, metrics: WebhookMetrics) -> Result<BoundWebhooks, Error> {
        let failed = |reason: String| Error::Webhooks {
            address: self.address.clone(),
            reason,
        };
        let mut signed_later = None;
        let (config, ca_bundle, reload) = match &self.certificate {
            Certificate::Dir(dir) => {
                let (config, reload) =
                    reloading_certificate(dir.clone(), CERTIFICATE_CHECK).map_err(failed)?;
                (config, None, Some(reload.boxed()))
            }
            Certificate::SelfSigned => {
                let (config, pem) = self_signed_for(&self.dns_names).map_err(failed)?;
                (config, Some(pem), None)
            }
            Certificate::CaSecret { .. } => {
                let (config, later) = later_certificate().map_err(failed)?;
                signed_later = Some(later);
                (config, None, None)
            }
        };
        let listener = TcpListener::bind(&self.address).await;
        let listener = listener.map_err(|e| failed(e.to_string()))?;
        let address = listener.local_addr().map_err(|e| failed(e.to_string()))?;
        Ok(BoundWebhooks {
            settings: self.clone(),
            listener,
            address,
            tls: TlsAcceptor::from(Arc::new(config)),
            ca_bundle,
            reload,
            signed_later,
            metrics,
        })
    }
}

impl BoundWebhooks {
    /// Where it listens.
    pub(crate) fn address(&self) -> SocketAddr {
        self.address
    }

    /// The self-signed certificate in PEM; `None` with a certificate directory.
    pub(crate) fn ca_bundle(&self) -> Option<String> {
        self.ca_bundle.clone()
    }

    /// Serves until `background` is aborted, its handlers reading `runtime`'s caches.
    pub(crate) fn serve(self, runtime: Arc<Runtime>, background: &mut JoinSet<()>) {
        let served = Served::new(runtime.clone(), &self.settings, self.metrics);
        let paths: Vec<&str> = self
            .settings
            .routes
            .iter()
            .map(|r| r.path.as_str())
            .collect();
        let converts = (!self.settings.converters.is_empty()).then_some(super::CONVERSION_PATH);
        let paths = paths
            .into_iter()
            .chain(converts)
            .collect::<Vec<_>>()
            .join(" ");
        tracing::info!(address = %self.address, "serving webhooks over HTTPS: {paths}");
        let router = router(Arc::new(served));
        if let Some(reload) = self.reload {
            background.spawn(reload);
        }
        if let (
            Some(later),
            Certificate::CaSecret {
                context,
                namespace,
                name,
            },
        ) = (self.signed_later, &self.settings.certificate)
        {
            let access = runtime
                .pool
                .access()
                .find(|(c, _)| c == context)
                .map(|(_, a)| a);
            let client = access.ok_or_else(|| "it has no client".to_owned());
            match client.and_then(crate::client::own_client) {
                Ok(client) => {
                    let names = self.settings.dns_names.clone();
                    let registrations = self.settings.registrations.clone();
                    let secret = (namespace.clone(), name.clone());
                    background.spawn(sign(client, secret, names, later, registrations));
                }
                Err(problem) => tracing::error!(cluster = %context, %problem,
                    "webhooks: the CA's context cannot be reached; no certificate will be served"),
            }
        }
        let (listener, tls) = (self.listener, self.tls);
        let stop = on_a_thread_of_its_own(listener, async move |listener| {
            serve_connections(listener, router, Some(tls), "webhook server").await
        });
        match stop {
            // Ends the server's thread when the background tasks are aborted (the manager stops).
            Ok(stop) => {
                _ = background.spawn(async move {
                    let _stop = stop;
                    std::future::pending::<()>().await
                })
            }
            Err(problem) => tracing::error!(%problem, "webhooks: cannot start the server's thread"),
        }
    }
}

/// Reads (or makes) the CA in Secret `namespace/name`, retrying with backoff; signs the serving certificate
/// for `localhost`, `127.0.0.1` and `names` with it and serves that; then keeps the registrations'
/// `caBundle` equal to the CA's certificate.
async fn sign(
    client: kube::Client,
    (namespace, name): (String, String),
    names: Vec<String>,
    later: Arc<LaterCertificate>,
    registrations: Vec<Registration>,
) {
    let mut retry = RetryBackoff::default();
    let mut logged = LogThrottle::new(Duration::from_secs(600));
    let ca = loop {
        match ca::get_or_create(client.clone(), &namespace, &name).await {
            Ok(ca) => break ca,
            Err(problem) => {
                if logged.warn(&problem) {
                    tracing::warn!(%problem, "webhooks: cannot read or store the CA; trying again");
                }
                tokio::time::sleep(retry.next_delay()).await;
            }
        }
    };
    let mut all = SELF_SIGNED_NAMES.map(str::to_owned).to_vec();
    all.extend(names);
    let signed = ca.sign(&all).and_then(|(cert, key)| later.set(&cert, &key));
    if let Err(problem) = signed {
        tracing::error!(%problem, "webhooks: cannot sign the serving certificate with the CA in Secret {namespace}/{name}");
        return;
    }
    tracing::info!("webhooks: serving a certificate signed by the CA in Secret {namespace}/{name}");
    ca_bundle::keep(client, registrations, ca.cert).await;
}

/// How long stopping the webhook server waits for its thread to end (its runtime's tasks dropped).
const STOPPED_WITHIN: Duration = Duration::from_secs(5);

/// The webhook server's thread, stopped when this is dropped: the drop returns once the thread has ended
/// (at most [`STOPPED_WITHIN`]), so that a manager's shutdown leaves no server answering after it — a
/// call then would meet handlers cancelled mid-way instead of a closed port.
struct ServerThread {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    ended: std::sync::mpsc::Receiver<()>,
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        drop(self.stop.take());
        // Disconnected when the thread ends; a timeout leaves it to end on its own.
        let _ = self.ended.recv_timeout(STOPPED_WITHIN);
    }
}

/// Runs `serve` (given `listener`) on a runtime of its own, on two threads of its own, until the returned
/// thread is dropped: the answers do not queue behind the controllers' work, which can keep the manager's
/// runtime busy for seconds at a time while a fleet converges.
fn on_a_thread_of_its_own<F>(
    listener: TcpListener,
    serve: impl FnOnce(TcpListener) -> F + Send + 'static,
) -> Result<ServerThread, String>
where
    F: Future<Output = ()> + 'static,
{
    let listener = listener.into_std().map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("kubeplex-webhooks")
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (ending, ended) = std::sync::mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("kubeplex-webhooks".into())
        .spawn(move || {
            let _ending = ending;
            runtime.block_on(async move {
                let listener = match TcpListener::from_std(listener) {
                    Ok(listener) => listener,
                    Err(error) => {
                        tracing::error!(%error, "webhooks: cannot listen");
                        return;
                    }
                };
                tokio::select! {
                    () = serve(listener) => {}
                    _ = stopped => {}
                }
            });
            // Dropping the runtime ends the connections' tasks with it, before `_ending` tells so.
            drop(runtime);
        })
        .map_err(|e| e.to_string())?;
    Ok(ServerThread {
        stop: Some(stop),
        ended,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slow to drop, as a server whose connections take a while to end.
    struct SlowToEnd;

    impl Drop for SlowToEnd {
        fn drop(&mut self) {
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    #[tokio::test]
    async fn once_the_server_thread_is_dropped_its_port_is_closed() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let thread = on_a_thread_of_its_own(listener, async move |listener| {
            let _slow = SlowToEnd;
            loop {
                let _ = listener.accept().await;
            }
        })
        .unwrap();
        let open = tokio::time::timeout(STOPPED_WITHIN, tokio::net::TcpStream::connect(address));
        assert!(matches!(open.await, Ok(Ok(_))), "the server listens");
        drop(thread);
        let refused = tokio::time::timeout(STOPPED_WITHIN, tokio::net::TcpStream::connect(address));
        assert!(
            matches!(refused.await, Ok(Err(_))),
            "still listening after the stop returned"
        );
    }
}
