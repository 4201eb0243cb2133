//! A TCP stand-in for a member's API server address: it forwards to the real one, refuses (nothing listens),
//! or holds every connection without answering (a black hole), and can switch between these on the same port.

use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::Mutex;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// What the stand-in does with a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Forwards it to the real server.
    Forward,
    /// Accepts it and never answers.
    Blackhole,
}

/// The stand-in; dropping it closes every connection.
pub struct Proxy {
    address: SocketAddr,
    target: SocketAddr,
    tasks: Arc<Mutex<JoinSet<()>>>,
}

impl Proxy {
    /// A stand-in for `target` (`https://host:port` or `host:port`) on a free local port, in `mode`.
    pub async fn start(target: &str, mode: Mode) -> Self {
        let target = target.trim_start_matches("https://").parse().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let proxy = Self {
            address,
            target,
            tasks: Arc::default(),
        };
        proxy.serve(listener, mode);
        proxy
    }

    /// `https://127.0.0.1:<port>`: the URL a kubeconfig puts in place of the real server's.
    pub fn url(&self) -> String {
        format!("https://{}", self.address)
    }

    /// Closes the port and every connection: the server is refused until [`listen`](Self::listen).
    pub fn close(&self) {
        self.tasks.lock().abort_all();
    }

    /// Listens again on the same port, in `mode`.
    pub async fn listen(&self, mode: Mode) {
        // Aborted and awaited, so that the port is free again (an aborted task is dropped when the
        // runtime next gets to it, on another thread maybe).
        let mut old = std::mem::take(&mut *self.tasks.lock());
        old.shutdown().await;
        let listener = TcpListener::bind(self.address).await.unwrap();
        self.serve(listener, mode);
    }

    fn serve(&self, listener: TcpListener, mode: Mode) {
        let (tasks, target) = (self.tasks.clone(), self.target);
        let spawned = tasks.clone();
        tasks.lock().spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                spawned.lock().spawn(async move {
                    match mode {
                        Mode::Forward => {
                            if let Ok(mut outbound) = TcpStream::connect(target).await {
                                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound)
                                    .await;
                            }
                        }
                        Mode::Blackhole => {
                            std::future::pending::<()>().await;
                            drop(inbound);
                        }
                    }
                });
            }
        });
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.close();
    }
}

/// A local port nothing listens on (bound, then released).
pub fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}
