//! A TCP relay that delays every byte by a fixed time each way, so that a local API server answers like one in
//! another region. TLS passes through untouched (the relay listens on 127.0.0.1, which the servers'
//! certificates name).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// A running relay; dropping it closes the listener and every relayed connection.
pub(super) struct DelayedLink {
    address: SocketAddr,
    _tasks: JoinSet<()>,
}

impl DelayedLink {
    /// Relays connections on a new 127.0.0.1 port to `upstream`, each way `one_way` later.
    pub async fn start(upstream: SocketAddr, one_way: Duration) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let mut tasks = JoinSet::new();
        tasks.spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                connections.spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::join!(
                        pump(client_read, server_write, one_way),
                        pump(server_read, client_write, one_way),
                    );
                });
            }
        });
        Ok(Self {
            address,
            _tasks: tasks,
        })
    }

    /// Where to connect instead of the upstream.
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

/// Copies `from` to `to`, each chunk `delay` after it was read, in order; closes `to` after `from` ends.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, delay: Duration) {
    let (chunks, mut delayed) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reader = async move {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if chunks
                        .send((Instant::now() + delay, buffer[..n].to_vec()))
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    };
    let writer = async move {
        while let Some((due, chunk)) = delayed.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reader, writer);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bytes_arrive_intact_and_a_round_trip_takes_twice_the_delay() {
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream = echo.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut socket, _) = echo.accept().await.unwrap();
            let mut buffer = vec![0u8; 1 << 20];
            loop {
                let n = socket.read(&mut buffer).await.unwrap();
                if n == 0 {
                    break;
                }
                socket.write_all(&buffer[..n]).await.unwrap();
            }
        });
        let link = DelayedLink::start(upstream, Duration::from_millis(40))
            .await
            .unwrap();
        let mut stream = TcpStream::connect(link.address()).await.unwrap();
        let message: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let started = std::time::Instant::now();
        stream.write_all(&message).await.unwrap();
        let mut echoed = vec![0u8; message.len()];
        stream.read_exact(&mut echoed).await.unwrap();
        assert!(echoed == message, "the relay changed the bytes");
        assert!(
            started.elapsed() >= Duration::from_millis(80),
            "a round trip through a 40 ms link took {:?}",
            started.elapsed()
        );
    }
}
