//! A TCP relay that can cut one replica off from one API server, and the kubeconfig that goes through it.

use kubeplex::Context as _;
use kubeplex_fleet::Fleet;
use kubeplex_testenv::TestEnv;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A TCP relay in front of an API server that can be cut: while cut, every byte either way is held (a
/// black hole, as a partition looks to both ends: no reset, no answer).
pub struct Relay {
    address: std::net::SocketAddr,
    cut: tokio::sync::watch::Sender<bool>,
}

impl Relay {
    pub async fn start(upstream: std::net::SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (cut, open) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                    continue;
                };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(pipe(client_read, server_write, open.clone()));
                tokio::spawn(pipe(server_read, client_write, open.clone()));
            }
        });
        Self { address, cut }
    }

    pub fn cut(&self) {
        self.cut.send_replace(true);
    }
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut cut: tokio::sync::watch::Receiver<bool>,
) {
    let mut buffer = vec![0; 64 * 1024];
    loop {
        let Ok(n) = from.read(&mut buffer).await else {
            return;
        };
        if n == 0 || cut.wait_for(|cut| !*cut).await.is_err() {
            return;
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
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
    for named in &mut kubeconfig.clusters {
        if named.name == cluster.name() {
            named.cluster.as_mut().unwrap().server = Some(format!("https://{}", relay.address));
        }
    }
    let path = env.kubeconfig_path().with_file_name(file);
    // JSON is YAML: kubeconfig readers take it as it is.
    std::fs::write(&path, serde_json::to_vec(&kubeconfig).unwrap()).unwrap();
    path
}

pub fn server_of(env: &TestEnv, cluster: Fleet) -> std::net::SocketAddr {
    let named = env
        .kubeconfig()
        .clusters
        .iter()
        .find(|c| c.name == cluster.name())
        .unwrap();
    let server = named.cluster.as_ref().unwrap().server.clone().unwrap();
    server.strip_prefix("https://").unwrap().parse().unwrap()
}
