//! Starting environments again and again never fails on a port: the ports are reserved before the
//! programs start and held until the environment is gone, while other programs take ports all along.

use std::collections::VecDeque;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use kubeplex_testenv::TestEnv;

/// How many run at once (on two cores, two at a time take about as long as one).
const AT_ONCE: usize = 2;

/// The clusters of each start: two, whose six ports are reserved while the other start reserves its own.
const CLUSTERS: [&str; 2] = ["control", "cluster-a"];

/// Starts in total: one wave in the gate, `KUBEPLEX_STARTS` for a longer series (`docs/testing.md`).
fn starts() -> usize {
    std::env::var("KUBEPLEX_STARTS").map_or(AT_ONCE, |n| {
        let n: usize = n.parse().expect("KUBEPLEX_STARTS is a number of starts");
        assert!(
            n > 0 && n.is_multiple_of(AT_ONCE),
            "KUBEPLEX_STARTS is a positive multiple of {AT_ONCE}"
        );
        n
    })
}

/// Keeps taking free loopback ports the way other programs on a busy machine do (other test
/// environments, servers started on port 0): about a thousand a second, each held for half a second. A
/// port chosen free and released before a program binds it is soon one of these. (Outgoing connections
/// rarely are: Linux gives them even ports and `bind(0)` odd ones.)
fn take_ports(stop: Arc<AtomicBool>) -> thread::JoinHandle<usize> {
    thread::spawn(move || {
        let mut held = VecDeque::new();
        let mut taken = 0;
        while !stop.load(Ordering::Relaxed) {
            held.push_back(TcpListener::bind("127.0.0.1:0").unwrap());
            taken += 1;
            if held.len() > 500 {
                held.pop_front();
            }
            thread::sleep(Duration::from_millis(1));
        }
        taken
    })
}

#[test]
fn starts_of_two_clusters_while_others_take_ports() {
    let starts = starts();
    let stop = Arc::new(AtomicBool::new(false));
    let thief = take_ports(stop.clone());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let started = Instant::now();
    let mut failures = Vec::new();
    for wave in 0..starts / AT_ONCE {
        let results: Vec<kubeplex_testenv::Result<()>> =
            runtime.block_on(futures::future::join_all((0..AT_ONCE).map(|_| async {
                let env = TestEnv::builder().clusters(CLUSTERS).start().await?;
                // Every context answers, on the port it was given.
                for cluster in CLUSTERS {
                    env.client(cluster)
                        .await?
                        .apiserver_version()
                        .await
                        .map_err(|source| kubeplex_testenv::Error::Kube {
                            cluster: cluster.into(),
                            source,
                        })?;
                }
                Ok(())
            })));
        for (i, result) in results.into_iter().enumerate() {
            if let Err(error) = result {
                failures.push(format!("start {}: {error}", wave * AT_ONCE + i + 1));
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let taken = thief.join().unwrap();
    eprintln!(
        "{starts} starts of {} clusters in {:?}, {taken} ports taken by others meanwhile",
        CLUSTERS.len(),
        started.elapsed()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
