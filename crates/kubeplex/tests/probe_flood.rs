//! The probe server under a flood of idle connections with the file-descriptor limit reached: its own
//! process (the limit is per process), the flood from another (python3), no cluster needed.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// CPU time this process has used, user + system.
fn cpu_time() -> Duration {
    let mut usage = unsafe { std::mem::zeroed::<libc::rusage>() };
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) }, 0);
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

/// GET `path`, retrying a refused or reset connection; the status code and how long it took.
async fn get(address: std::net::SocketAddr, path: &str) -> (u16, Duration) {
    let started = Instant::now();
    loop {
        let attempt = async {
            let mut stream = tokio::net::TcpStream::connect(address).await?;
            stream
                .write_all(
                    format!("GET {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
                        .as_bytes(),
                )
                .await?;
            let mut response = String::new();
            stream.read_to_string(&mut response).await?;
            Ok::<_, std::io::Error>(response)
        };
        if let Ok(Ok(response)) = tokio::time::timeout(Duration::from_secs(2), attempt).await
            && let Some(code) = response.split(' ').nth(1).and_then(|c| c.parse().ok())
        {
            return (code, started.elapsed());
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{path} never answered"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_idle_connections_at_the_descriptor_limit_neither_spins_nor_starves_readyz() {
    // A low descriptor limit, as on a small node: the flood below exceeds it.
    let limit = libc::rlimit {
        rlim_cur: 256,
        rlim_max: 4096,
    };
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
    let running = kubeplex::Manager::with_kubeconfig(Default::default())
        .probes("127.0.0.1:0")
        .start()
        .await
        .unwrap();
    let address = running.probe_address().unwrap();
    assert_eq!(get(address, "/readyz").await.0, 200);

    // 1 000 connections that never send a byte, held open by another process.
    let flood = format!(
        "import resource, socket, sys, time\n\
         resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))\n\
         held = [socket.create_connection(('127.0.0.1', {port})) for _ in range(1000)]\n\
         print(len(held), flush=True)\n\
         time.sleep(30)\n",
        port = address.port()
    );
    let mut flooder = Command::new("python3")
        .args(["-c", &flood])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs the flood");
    let mut opened = String::new();
    let stdout = flooder.stdout.take().unwrap();
    let read = tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let mut stdout = stdout;
        let mut buffer = [0u8; 16];
        let n = stdout.read(&mut buffer).unwrap_or(0);
        String::from_utf8_lossy(&buffer[..n]).into_owned()
    });
    opened.push_str(
        &tokio::time::timeout(Duration::from_secs(20), read)
            .await
            .unwrap()
            .unwrap(),
    );
    assert_eq!(opened.trim(), "1000", "the flood is in place");

    let cpu_before = cpu_time();
    let mut slowest = Duration::ZERO;
    for _ in 0..10 {
        let (code, took) = get(address, "/readyz").await;
        assert_eq!(code, 200);
        slowest = slowest.max(took);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let cpu = cpu_time() - cpu_before;
    let _ = flooder.kill();
    let _ = flooder.wait();
    assert!(
        slowest < Duration::from_secs(1),
        "/readyz took {slowest:?} under the flood"
    );
    // Ten probe requests over ~2 s; a spinning accept loop would burn about that much CPU.
    assert!(
        cpu < Duration::from_millis(500),
        "{cpu:?} of CPU while flooded"
    );
    tokio::time::timeout(Duration::from_secs(60), running.shutdown())
        .await
        .expect("the operator shuts down within 60 s");
}
