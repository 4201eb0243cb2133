//! A TCP relay in front of one API server, to take the server away from whoever goes through it alone.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};

use kube::config::Kubeconfig;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;

use crate::control_plane::ReservedPort;
use crate::error::{Error, Result};

/// What goes through the relay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    /// Every byte, both ways.
    Open,
    /// No byte either way, held until it opens again: no reset, no answer.
    Cut,
    /// No connection: those open are closed, new ones refused.
    Refused,
}

/// A TCP relay in front of a cluster's API server ([`TestEnv::relay`](crate::TestEnv::relay)).
///
/// It takes the server away from whoever goes through it, and from nobody else: held bytes (as a frozen
/// server looks) or refused connections (as a stopped one looks), while the server goes on serving the
/// tests that share it. Point a kubeconfig at it with [`Relay::route`] or
/// [`TestEnv::kubeconfig_path_via`](crate::TestEnv::kubeconfig_path_via). Dropping it closes its
/// connections.
pub struct Relay {
    pub(crate) cluster: String,
    address: SocketAddr,
    path: watch::Sender<Path>,
    /// Bound to the relay's port, never listening: while refused, the port stays the relay's, so that it
    /// listens again where the kubeconfigs point.
    _port: ReservedPort,
}

impl Relay {
    /// A relay to `upstream`, the API server of `cluster`, listening when this returns.
    pub(crate) fn start(cluster: &str, upstream: SocketAddr) -> Result<Self> {
        let failed = |error: std::io::Error| Error::Relay {
            cluster: cluster.to_owned(),
            problem: format!("cannot listen on a loopback port: {error}"),
        };
        let port = ReservedPort::new().map_err(failed)?;
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port.port()));
        let listener = listen(address).map_err(failed)?;
        let (path, seen) = watch::channel(Path::Open);
        tokio::spawn(accept(listener, address, upstream, seen));
        Ok(Self {
            cluster: cluster.to_owned(),
            address,
            path,
            _port: port,
        })
    }

    /// Where it listens, on 127.0.0.1 (the API server's certificate names that address, not the port).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Points the cluster of `kubeconfig` named as the relay's cluster at the relay: its clients go through
    /// it from now on. Fails when `kubeconfig` has no such cluster.
    pub fn route(&self, kubeconfig: &mut Kubeconfig) -> Result<()> {
        let cluster = (kubeconfig.clusters.iter_mut())
            .find(|named| named.name == self.cluster)
            .and_then(|named| named.cluster.as_mut())
            .ok_or_else(|| Error::Relay {
                cluster: self.cluster.clone(),
                problem: "the kubeconfig to route has no cluster of that name".into(),
            })?;
        cluster.server = Some(format!("https://{}", self.address));
        Ok(())
    }

    /// Holds every byte either way until [`Relay::open`].
    pub fn cut(&self) {
        self.path.send_replace(Path::Cut);
    }

    /// Closes every connection and refuses new ones until [`Relay::open`]: as the server looks stopped.
    pub fn refuse(&self) {
        self.path.send_replace(Path::Refused);
    }

    /// Passes everything again (what was held, first).
    pub fn open(&self) {
        self.path.send_replace(Path::Open);
    }
}

impl fmt::Debug for Relay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Relay")
            .field("cluster", &self.cluster)
            .field("address", &self.address)
            .field("path", &*self.path.borrow())
            .finish_non_exhaustive()
    }
}

/// A listener on the relay's reserved port, which it shares as the API servers share theirs
/// (`SO_REUSEPORT`, `control_plane/reserved_port.rs`).
fn listen(address: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseport(true)?;
    socket.bind(address)?;
    socket.listen(1024)
}

/// Relays each connection `listener` accepts to `upstream`; while refused, nothing listens on `address`,
/// so the kernel refuses connections. Ends when the relay is dropped.
async fn accept(
    mut listener: TcpListener,
    address: SocketAddr,
    upstream: SocketAddr,
    path: watch::Receiver<Path>,
) {
    let mut seen = path.clone();
    loop {
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    if let Ok((client, _)) = accepted {
                        tokio::spawn(relay(client, upstream, path.clone()));
                    }
                }
                refused = seen.wait_for(|p| *p == Path::Refused) => {
                    if refused.is_err() {
                        return;
                    }
                    break;
                }
            }
        }
        drop(listener);
        if seen.wait_for(|p| *p != Path::Refused).await.is_err() {
            return;
        }
        listener = match listen(address) {
            Ok(listener) => listener,
            Err(error) => {
                // Nobody to return it to: the relay stays refused, and says why.
                tracing::error!(%address, %error, "relay: cannot listen again, refusing from now on");
                return;
            }
        };
    }
}

async fn relay(client: TcpStream, upstream: SocketAddr, path: watch::Receiver<Path>) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::spawn(pipe(client_read, server_write, path.clone()));
    pipe(server_read, client_write, path).await;
}

/// Copies `from` to `to` while open, holds what it read while cut, and drops both (closing the connection
/// once the other direction does too) when refused or when the relay is dropped.
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut path: watch::Receiver<Path>) {
    let mut buffer = vec![0; 64 * 1024];
    loop {
        let n = tokio::select! {
            read = from.read(&mut buffer) => match read {
                Ok(n) if n > 0 => n,
                _ => return,
            },
            _ = path.wait_for(|p| *p == Path::Refused) => return,
        };
        match path.wait_for(|p| *p != Path::Cut).await {
            Ok(p) if *p == Path::Open => {}
            _ => return,
        }
        tokio::select! {
            written = to.write_all(&buffer[..n]) => if written.is_err() {
                return;
            },
            _ = path.wait_for(|p| *p == Path::Refused) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::ErrorKind;
    use std::time::Duration;

    use kube::config::{Cluster, NamedCluster};
    use tokio::time::{sleep, timeout};

    use super::*;

    /// Ample for anything on loopback, even on a loaded machine.
    const LONG: Duration = Duration::from_secs(10);
    /// How long a cut relay must keep an answer back.
    const SILENT: Duration = Duration::from_millis(500);

    /// A relay in front of a server that echoes every byte.
    async fn relayed_echo() -> Relay {
        let server = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let upstream = server.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = server.accept().await {
                tokio::spawn(async move {
                    let (mut from, mut to) = stream.split();
                    let _ = tokio::io::copy(&mut from, &mut to).await;
                });
            }
        });
        Relay::start("cluster-a", upstream).unwrap()
    }

    /// Sends `request` and reads as many bytes back, within [`LONG`].
    async fn ask(stream: &mut TcpStream, request: &[u8]) -> Vec<u8> {
        stream.write_all(request).await.unwrap();
        let mut answer = vec![0; request.len()];
        let read = timeout(LONG, stream.read_exact(&mut answer)).await;
        read.expect("answered in time").unwrap();
        answer
    }

    /// Connects to `address` until `wanted` takes the outcome: the relay's listener goes and comes back in
    /// its own task, a moment after `refuse` and `open`.
    async fn connect_until<T>(
        address: SocketAddr,
        wanted: impl Fn(std::io::Result<TcpStream>) -> Option<T>,
    ) -> T {
        let attempts = async {
            loop {
                if let Some(outcome) = wanted(TcpStream::connect(address).await) {
                    return outcome;
                }
                sleep(Duration::from_millis(10)).await;
            }
        };
        timeout(LONG, attempts).await.expect("in time")
    }

    #[tokio::test]
    async fn an_open_relay_passes_requests_and_answers() {
        let relay = relayed_echo().await;
        let mut stream = TcpStream::connect(relay.address()).await.unwrap();
        assert_eq!(ask(&mut stream, b"GET /readyz").await, b"GET /readyz");
        assert_eq!(ask(&mut stream, b"GET /livez").await, b"GET /livez");
    }

    #[tokio::test]
    async fn a_refusing_relay_closes_its_connections_and_refuses_new_ones() {
        let relay = relayed_echo().await;
        let mut open = TcpStream::connect(relay.address()).await.unwrap();
        ask(&mut open, b"ping").await;

        relay.refuse();
        let mut byte = [0; 1];
        let read = timeout(LONG, open.read(&mut byte)).await;
        // Closed (end of stream, or a reset), not held.
        assert!(matches!(read, Ok(Ok(0) | Err(_))), "{read:?}");
        // Refused, in time: a connection that meets the listener as it closes is reset, and tried again.
        let refused = connect_until(relay.address(), |c| {
            c.err().filter(|e| e.kind() != ErrorKind::ConnectionReset)
        })
        .await;
        assert_eq!(refused.kind(), ErrorKind::ConnectionRefused, "{refused}");

        relay.open();
        let mut again = connect_until(relay.address(), Result::ok).await;
        assert_eq!(ask(&mut again, b"back").await, b"back");
    }

    #[tokio::test]
    async fn a_cut_relay_holds_requests_until_it_opens() {
        let relay = relayed_echo().await;
        let mut before = TcpStream::connect(relay.address()).await.unwrap();
        ask(&mut before, b"ping").await;

        relay.cut();
        // A connection open before, and one made while cut (accepted, then held).
        let mut during = TcpStream::connect(relay.address()).await.unwrap();
        let mut answers = [[0; 4]; 2];
        for (stream, answer) in [&mut before, &mut during].into_iter().zip(&mut answers) {
            stream.write_all(b"held").await.unwrap();
            let read = timeout(SILENT, stream.read_exact(answer)).await;
            assert!(read.is_err(), "answered while cut: {read:?}");
        }

        relay.open();
        for (stream, answer) in [&mut before, &mut during].into_iter().zip(&mut answers) {
            timeout(LONG, stream.read_exact(answer))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(answer, b"held");
        }
    }

    #[tokio::test]
    async fn route_points_the_relays_cluster_at_it() {
        let relay = relayed_echo().await;
        let named = |name: &str| NamedCluster {
            name: name.into(),
            cluster: Some(Cluster {
                server: Some("https://127.0.0.1:1".into()),
                ..Cluster::default()
            }),
            ..NamedCluster::default()
        };
        let mut kubeconfig = Kubeconfig {
            clusters: vec![named("control"), named("cluster-a")],
            ..Kubeconfig::default()
        };
        relay.route(&mut kubeconfig).unwrap();
        let servers: Vec<_> = (kubeconfig.clusters.iter())
            .map(|c| c.cluster.as_ref().unwrap().server.clone().unwrap())
            .collect();
        let through = format!("https://{}", relay.address());
        assert_eq!(servers, ["https://127.0.0.1:1", through.as_str()]);

        let mut elsewhere = Kubeconfig {
            clusters: vec![named("control")],
            ..Kubeconfig::default()
        };
        let missing = relay.route(&mut elsewhere);
        assert!(matches!(&missing, Err(Error::Relay { cluster, .. }) if cluster == "cluster-a"));
    }
}
