//! A TCP relay in front of one API server that can take the server away from whoever goes through it, and
//! from nobody else: held (a partition, as a frozen server looks) or refused (as a stopped one looks), while
//! the server goes on serving the other tests that share it. And the kubeconfig that goes through it.
#![allow(dead_code)] // The `ha` binary includes this file too; each binary uses a different part.

use std::net::SocketAddr;

use kube::config::Kubeconfig;
use kubeplex::Context as _;
use kubeplex_fleet::Fleet;
use kubeplex_testenv::TestEnv;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;

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

/// A TCP relay in front of an API server.
pub struct Relay {
    address: SocketAddr,
    path: watch::Sender<Path>,
    /// Bound to the relay's port, never listening: while refused, the port stays the relay's, so that it
    /// listens again where the kubeconfig points.
    _port: TcpSocket,
}

impl Relay {
    pub async fn start(upstream: SocketAddr) -> Self {
        let port = shared_port();
        port.bind(([127, 0, 0, 1], 0).into()).unwrap();
        let address = port.local_addr().unwrap();
        let (path, seen) = watch::channel(Path::Open);
        // Listening before the kubeconfig that points here is handed out.
        tokio::spawn(accept(listen(address), upstream, seen));
        Self {
            address,
            path,
            _port: port,
        }
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

/// A socket that may share its port with the relay's other sockets (`SO_REUSEPORT`).
fn shared_port() -> TcpSocket {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_reuseaddr(true).unwrap();
    socket.set_reuseport(true).unwrap();
    socket
}

fn listen(address: SocketAddr) -> TcpListener {
    let socket = shared_port();
    socket.bind(address).unwrap();
    socket.listen(1024).unwrap()
}

/// Relays each connection `listener` accepts to `upstream`; while refused, nothing listens on its address,
/// so the kernel refuses connections. Ends when the relay is dropped.
async fn accept(mut listener: TcpListener, upstream: SocketAddr, path: watch::Receiver<Path>) {
    let address = listener.local_addr().unwrap();
    let mut seen = path.clone();
    loop {
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((client, _)) = accepted else { continue };
                    tokio::spawn(relay(client, upstream, path.clone()));
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
        listener = listen(address);
    }
}

async fn relay(client: tokio::net::TcpStream, upstream: SocketAddr, path: watch::Receiver<Path>) {
    let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
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

/// `kubeconfig` with `cluster`'s server behind `relay`.
pub fn route(kubeconfig: &mut Kubeconfig, cluster: Fleet, relay: &Relay) {
    for named in &mut kubeconfig.clusters {
        if named.name == cluster.name() {
            named.cluster.as_mut().unwrap().server = Some(format!("https://{}", relay.address));
        }
    }
}

/// The environment's kubeconfig with `cluster`'s server behind `relay`, written next to it.
pub fn kubeconfig_via(
    env: &TestEnv,
    cluster: Fleet,
    relay: &Relay,
    file: &str,
) -> std::path::PathBuf {
    let mut kubeconfig = env.kubeconfig().clone();
    route(&mut kubeconfig, cluster, relay);
    let path = env.kubeconfig_path().with_file_name(file);
    // JSON is YAML: kubeconfig readers take it as it is.
    std::fs::write(&path, serde_json::to_vec(&kubeconfig).unwrap()).unwrap();
    path
}

pub fn server_of(env: &TestEnv, cluster: Fleet) -> SocketAddr {
    let named = env
        .kubeconfig()
        .clusters
        .iter()
        .find(|c| c.name == cluster.name())
        .unwrap();
    let server = named.cluster.as_ref().unwrap().server.clone().unwrap();
    server.strip_prefix("https://").unwrap().parse().unwrap()
}
