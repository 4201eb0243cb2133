use std::io::{Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

/// A `/version` endpoint on its own thread; counts the requests it answered.
fn version_server() -> (String, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let answered = Arc::new(AtomicUsize::new(0));
    let count = answered.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let (mut stream, count) = (stream.unwrap(), count.clone());
            std::thread::spawn(move || {
                let mut buffer = [0u8; 4096];
                while let Ok(read) = stream.read(&mut buffer) {
                    if read == 0 {
                        return;
                    }
                    let body = r#"{"major":"1","minor":"37","gitVersion":"v1.37.2"}"#;
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    count.fetch_add(1, Ordering::SeqCst);
                    if stream.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, answered)
}

/// Runs [`until_due`] with the server answering the cluster's clients at `answers` (seconds after the
/// last ping); the seconds until the next ping is due.
async fn due_after(answers: &[u64], healthy: bool) -> u64 {
    let readiness = Readiness::default();
    readiness.declare("cluster-a", true);
    let start = tokio::time::Instant::now();
    let last = Arc::new(parking_lot::Mutex::new(None));
    let stamps = answers.to_vec();
    let stamping = {
        let last = last.clone();
        tokio::spawn(async move {
            for at in stamps {
                tokio::time::sleep_until(start + Duration::from_secs(at)).await;
                *last.lock() = Some(tokio::time::Instant::now());
            }
        })
    };
    let interval = Duration::from_secs(10);
    until_due("cluster-a", &readiness, start, interval, healthy, || {
        *last.lock()
    })
    .await;
    stamping.abort();
    (tokio::time::Instant::now() - start).as_secs()
}

#[tokio::test(start_paused = true)]
async fn a_ping_is_due_one_interval_after_the_last_answer_while_the_context_answers() {
    // No other answer: one interval after the ping.
    assert_eq!(due_after(&[], true).await, 10);
    // The controllers' requests answered every 3 s for a minute: no ping until one interval after the
    // last of them.
    let busy: Vec<u64> = (1..=20).map(|i| i * 3).collect();
    assert_eq!(due_after(&busy, true).await, 70);
    // An answer at 4 s: the ping at 14 s.
    assert_eq!(due_after(&[4], true).await, 14);
    // A cluster whose last ping failed is pinged every interval, answers or not: only a ping clears
    // its failure.
    assert_eq!(due_after(&busy, false).await, 10);
}

#[tokio::test(start_paused = true)]
async fn an_answer_in_place_of_a_ping_counts_as_one_for_the_watches() {
    let readiness = Arc::new(Readiness::default());
    readiness.declare("cluster-a", true);
    let watch = readiness.watch_started(
        "cluster-a",
        None,
        "Deployment.apps/v1".into(),
        "deployments".into(),
    );
    readiness.connected("cluster-a", None);
    watch.synced();
    let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
    let refused =
        kube::runtime::watcher::Error::WatchStartFailed(kube::Error::Service(Box::new(io)));
    watch.failed(&refused);
    assert!(!readiness.report().clusters["cluster-a"].reasons.is_empty());
    let start = tokio::time::Instant::now();
    let answered = start + Duration::from_secs(5);
    let wait = until_due(
        "cluster-a",
        &readiness,
        start,
        Duration::from_secs(10),
        true,
        || (tokio::time::Instant::now() >= answered).then_some(answered),
    );
    wait.await;
    assert_eq!(tokio::time::Instant::now() - start, Duration::from_secs(15));
    let report = readiness.report();
    assert!(
        report.clusters["cluster-a"].reasons.is_empty(),
        "{report:?}"
    );
}

#[tokio::test]
async fn the_first_ping_is_spared_a_cluster_that_answered_within_the_interval() {
    let (url, _) = version_server();
    let config = kube::Config::new(url.parse().unwrap());
    let access = Access::of("cluster-a", config, Duration::from_secs(30))
        .await
        .unwrap();
    let readiness = Readiness::default();
    readiness.declare("cluster-a", true);
    let interval = Duration::from_secs(10);
    assert!(
        !spared("cluster-a", &access, &readiness, interval),
        "no answer yet"
    );
    // The controllers' client, on the same credentials, answered.
    let client = crate::client::own_client(&access).unwrap();
    client.apiserver_version().await.unwrap();
    assert!(spared("cluster-a", &access, &readiness, interval));
    // Not while its writes wait to hear which cluster it is: the ping asks.
    let gate = access.identity().clone();
    readiness
        .identities()
        .declare_context("cluster-a", 0, gate.clone());
    assert!(!spared("cluster-a", &access, &readiness, interval));
    gate.pass();
    assert!(spared("cluster-a", &access, &readiness, interval));
    // Nor once the answer is an interval old.
    tokio::time::pause();
    tokio::time::advance(interval).await;
    assert!(!spared("cluster-a", &access, &readiness, interval));
}

#[tokio::test(flavor = "current_thread")]
async fn pings_go_on_while_the_operators_own_runtime_is_blocked() {
    let (url, answered) = version_server();
    assert!(first_delay("cluster-a", Duration::from_millis(200)) < Duration::from_millis(200));
    let config = kube::Config::new(url.parse().unwrap());
    let access = Access::of("cluster-a", config, Duration::from_secs(30))
        .await
        .unwrap();
    let readiness = Arc::new(Readiness::default());
    readiness.declare("cluster-a", true);
    let _pings = start(
        vec![("cluster-a".into(), access)],
        readiness.clone(),
        Duration::from_millis(200),
        Metrics::default(),
        false,
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = answered.load(Ordering::SeqCst);
    // A reconcile burst that holds every worker of the operator's runtime (here: its only thread) until
    // three more pings were answered; a ping that ran on this runtime could not be answered at all. The
    // deadline only bounds a failing run (a loaded machine may slow the pings, never stop them). It is
    // wall-clock time, as the sleeps are: this thread blocks its runtime on purpose, so tokio's clock
    // is not the one that measures it.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut during = 0;
    while during < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        during = answered.load(Ordering::SeqCst) - before;
    }
    assert!(
        during >= 3,
        "only {during} pings while the runtime was blocked"
    );
    let report = readiness.report();
    assert!(
        report.clusters["cluster-a"].reasons.is_empty(),
        "{report:?}"
    );
}
