use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::time::Instant;

use super::*;

/// A fenced stream over one end of an in-memory pipe, as tokio I/O, and the pipe's other end.
fn fenced_pipe(fence: &Fence) -> (TokioIo<FencedIo<TokioIo<DuplexStream>>>, DuplexStream) {
    let (ours, peer) = tokio::io::duplex(1024);
    let gate = Gate([fence.clone(), Fence::default()]);
    (TokioIo::new(FencedIo::new(TokioIo::new(ours), gate)), peer)
}

/// What the peer can read within a moment (the pipe is in memory: whatever was written is there at once).
async fn received(peer: &mut DuplexStream) -> Vec<u8> {
    let mut buf = vec![0; 64];
    match tokio::time::timeout(Duration::from_millis(50), peer.read(&mut buf)).await {
        Ok(Ok(n)) => buf[..n].to_vec(),
        Ok(Err(e)) => panic!("reading the pipe: {e}"),
        Err(_) => Vec::new(),
    }
}

#[tokio::test(start_paused = true)]
async fn writes_pass_while_open_and_none_reaches_the_peer_after_the_deadline() {
    let fence = Fence::closed();
    fence.open_for(Instant::now(), Duration::from_secs(10));
    let (mut io, mut peer) = fenced_pipe(&fence);

    io.write_all(b"PATCH /a").await.unwrap();
    io.flush().await.unwrap();
    assert_eq!(received(&mut peer).await, b"PATCH /a");

    // The process "was stopped" past its deadline: the next bytes are refused, none reach the peer.
    tokio::time::advance(Duration::from_secs(10)).await;
    let refused = io.write_all(b"DELETE /b").await.unwrap_err();
    assert_eq!(
        crate::core::fenced(&refused),
        Some("not the leader: this replica's lease was not renewed in time, so it writes nothing"),
        "the refusal is found through the error's chain: {refused}"
    );
    let vectored = [io::IoSlice::new(b"POST /c")];
    assert!(io.write_vectored(&vectored).await.is_err());
    assert!(io.flush().await.is_err());
    assert_eq!(
        received(&mut peer).await,
        b"",
        "nothing was sent after the deadline"
    );

    // Reads keep working: a response (or a watch event) still arrives.
    peer.write_all(b"HTTP/1.1 200 OK").await.unwrap();
    let mut buf = [0; 15];
    tokio::time::timeout(Duration::from_secs(1), io.read_exact(&mut buf))
        .await
        .expect("the read completes")
        .unwrap();
    assert_eq!(&buf, b"HTTP/1.1 200 OK");
}

#[tokio::test(start_paused = true)]
async fn either_fence_of_the_gate_closes_it() {
    let (client, shard) = (
        Fence::closed(),
        Fence::closed_saying(crate::client::NOT_THE_SHARD_OWNER),
    );
    client.open_for(Instant::now(), Duration::from_secs(60));
    shard.open_for(Instant::now(), Duration::from_secs(5));
    let gate = Gate([client.clone(), shard.clone()]);
    assert!(gate.check().is_ok());
    tokio::time::advance(Duration::from_secs(5)).await;
    let refused = gate.check().unwrap_err();
    assert_eq!(
        crate::core::fenced(&refused),
        Some(crate::client::NOT_THE_SHARD_OWNER)
    );
    shard.open_for(Instant::now(), Duration::from_secs(5));
    client.close();
    assert!(
        gate.check()
            .unwrap_err()
            .to_string()
            .starts_with("not the leader")
    );
}
