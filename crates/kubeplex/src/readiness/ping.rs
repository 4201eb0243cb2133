//! Pings: each cluster's API server is asked for `/version` at an interval, so that a cluster that stops
//! answering shows in `/readyz` even while its watch connections stay open (a frozen or partitioned server).
//! A cluster whose server answered its controllers within the interval is not asked: the answer shows as
//! much as a ping would.

use std::sync::Arc;
use std::time::Duration;

use super::identify::identify_over_own;
use super::readiness::Readiness;
use crate::client::Access;
use crate::core::{Shrink, chain};
use crate::metrics::Metrics;

/// How often each cluster's API server is asked for `/version` by default.
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(10);
/// How often the ping thread looks whether the manager has started, before the first round.
const STARTED_POLL: Duration = Duration::from_millis(100);
/// How long a ping may take before the cluster counts as unreachable.
pub const PING_TIMEOUT: Duration = Duration::from_secs(5);
/// What a ping reports when the server refuses the credentials.
const REJECTED: &str = "credentials were rejected (401 Unauthorized)";

/// The pings' own thread; dropping this ends them.
pub(crate) struct Pings {
    _stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// The thread's runtime, for the pings of members that join later.
    handle: Option<tokio::runtime::Handle>,
    members: parking_lot::Mutex<std::collections::HashMap<String, tokio::task::AbortHandle>>,
    /// Told the name of a member whose server starts rejecting its credentials.
    rejected: std::sync::OnceLock<tokio::sync::mpsc::Sender<String>>,
    readiness: Arc<Readiness>,
    interval: Duration,
    metrics: Metrics,
}

impl Pings {
    /// Pings member `name` from now on (anew, when its configuration changed).
    pub(crate) fn add(&self, name: &str, access: Access) {
        let Some(handle) = &self.handle else { return };
        let (readiness, metrics) = (self.readiness.clone(), self.metrics.clone());
        let rejected = self.rejected.get().cloned();
        let ping = ping(
            name.to_owned(),
            access,
            readiness,
            self.interval,
            metrics,
            rejected,
        );
        let task = handle.spawn(ping);
        let mut members = self.members.lock();
        if let Some(earlier) = members.insert(name.to_owned(), task.abort_handle()) {
            earlier.abort();
        }
    }

    /// From now on, members whose credentials are rejected are named to `rejected` (once per change).
    pub(crate) fn tell_rejections(&self, rejected: tokio::sync::mpsc::Sender<String>) {
        let _ = self.rejected.set(rejected);
    }

    /// Stops pinging member `name`.
    pub(crate) fn remove(&self, name: &str) {
        let mut members = self.members.lock();
        if let Some(task) = members.remove(name) {
            task.abort();
        }
        members.shrink_when_sparse();
    }
}

/// Pings every `(context, config)` from a thread and runtime of their own: a ping measures whether the
/// cluster answers, so it must not wait behind the operator's own work (a reconcile burst that saturates
/// the workers would otherwise mark answering clusters unreachable). Each ping builds a client and drops it
/// after the answer, so an idle cluster holds no connection for its pings: a handshake every interval
/// costs less than a standing TLS connection per cluster. That client has the credentials of the
/// controllers' client (the same token, renewed by either on a 401), so a ping is refused when their
/// requests are. With `members`, the thread runs even with no context to ping, for the members that join
/// later.
pub(crate) fn start(
    clusters: Vec<(String, Access)>,
    readiness: Arc<Readiness>,
    interval: Duration,
    metrics: Metrics,
    members: bool,
) -> Pings {
    let mut pings = Pings {
        _stop: None,
        handle: None,
        members: parking_lot::Mutex::default(),
        rejected: std::sync::OnceLock::new(),
        readiness: readiness.clone(),
        interval,
        metrics: metrics.clone(),
    };
    if clusters.is_empty() && !members {
        return pings;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "cannot start the ping thread's runtime; clusters are not pinged");
            return pings;
        }
    };
    pings.handle = Some(runtime.handle().clone());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("kubeplex-pings".into())
        .spawn(move || {
            runtime.block_on(async move {
                // The first round waits until the manager has started (or one interval): while a
                // thousand contexts list and watch, their handshakes for pings would only compete with
                // them, and a server that does not answer holds its watches back from listing anyway.
                let deadline = tokio::time::Instant::now() + interval;
                while !readiness.is_started() && tokio::time::Instant::now() < deadline {
                    tokio::time::sleep(STARTED_POLL.min(interval)).await;
                }
                let mut pings = tokio::task::JoinSet::new();
                for (context, access) in clusters {
                    let (readiness, metrics) = (readiness.clone(), metrics.clone());
                    pings.spawn(ping(context, access, readiness, interval, metrics, None));
                }
                // Ends when the manager stops or is dropped.
                let _ = stopped.await;
            });
        });
    if let Err(error) = thread {
        tracing::error!(%error, "cannot start the ping thread; clusters are not pinged");
        pings.handle = None;
    }
    pings._stop = Some(stop);
    pings
}

/// Pings `context` every `interval`, recording whether it answers; a failure is logged when it changes.
/// A member's pings name it to `rejected` when its server starts refusing its credentials.
async fn ping(
    context: String,
    access: Access,
    readiness: Arc<Readiness>,
    interval: Duration,
    metrics: Metrics,
    rejected: Option<tokio::sync::mpsc::Sender<String>>,
) {
    // Spread over the first interval: a thousand contexts do not build clients and shake hands at once
    // (at startup, when the watches are listing, least of all). The watches report a dead server sooner.
    let first = tokio::time::sleep(first_delay(&context, interval));
    tokio::pin!(first);
    // Meanwhile, a cluster reached anew is asked at once: its writes wait for it.
    while tokio::select! {
        () = &mut first => false,
        () = access.identity().asked_again() => true,
    } {
        Box::pin(identify_over_own(&context, &access, &readiness)).await;
    }
    let mut last: Option<String> = None;
    let mut first_ping = true;
    loop {
        let began = tokio::time::Instant::now();
        if std::mem::take(&mut first_ping) && spared(&context, &access, &readiness, interval) {
            readiness.pinged(&context, None);
        } else {
            let rejected = rejected.as_ref();
            Box::pin(ping_once(
                &context, &access, &readiness, &metrics, rejected, &mut last,
            ))
            .await;
        }
        let healthy = last.is_none();
        let due = until_due(&context, &readiness, began, interval, healthy, || {
            access.last_answer()
        });
        tokio::pin!(due);
        loop {
            tokio::select! {
                () = &mut due => break,
                // Its reads connected anew: which cluster answers at its address now?
                () = access.identity().asked_again() => {
                    Box::pin(identify_over_own(&context, &access, &readiness)).await;
                }
            }
        }
    }
}

/// Whether the first ping of `context` can be spared: its server answered the controllers within the
/// interval and is not being asked which cluster it is. A busy start-up then opens no connection of its own
/// for the pings beside the controllers' two.
fn spared(context: &str, access: &Access, readiness: &Readiness, interval: Duration) -> bool {
    let answered = access
        .last_answer()
        .is_some_and(|at| at.elapsed() < interval);
    answered && !readiness.identities().is_held(context)
}

/// One ping of `context`, recorded; `last` is what the ping before it met.
async fn ping_once(
    context: &str,
    access: &Access,
    readiness: &Readiness,
    metrics: &Metrics,
    rejected: Option<&tokio::sync::mpsc::Sender<String>>,
    last: &mut Option<String>,
) {
    let began = tokio::time::Instant::now();
    // Boxed: a ping's future (a client, a request in flight) is ~2.5 KB, and a task that kept room for it
    // while it sleeps between pings would hold that much per idle cluster (a heap profile of many idle
    // contexts showed it: crates/kubeplex-bench/RUNS.md).
    let problem = Box::pin(once(access)).await;
    metrics.pinged(context, problem.is_none(), began.elapsed());
    let identities = readiness.identities();
    // Answering again: a server back from an outage may be another cluster behind the same address, so its
    // writes wait until it says which. One whose writes wait for its identity is asked at every ping,
    // whatever the ping met (a server that rejects the credentials answers the ask too).
    if identities.is_held(context) || (problem.is_none() && last.is_some()) {
        identities.hold(context);
        Box::pin(identify_over_own(context, access, readiness)).await;
    }
    if problem != *last {
        match &problem {
            // The cluster's outage is logged once for its pings and watches (`outage.rs`).
            Some(problem) => tracing::debug!(cluster = %context, %problem, "ping failed"),
            None if last.is_some() => tracing::debug!(cluster = %context, "answers pings again"),
            None => {}
        }
        if problem.as_deref() == Some(REJECTED)
            && let Some(rejected) = rejected
        {
            // The runner may be busy; a full queue only drops a repeat of a request already queued.
            let _ = rejected.try_send(context.to_owned());
        }
        last.clone_from(&problem);
    }
    readiness.pinged(context, problem);
}

/// Sleeps until `context`'s next ping is due: one `interval` after the ping that began at `pinged`, or,
/// while the cluster answers pings (`healthy`), after the server's last answer to any of the cluster's
/// clients (`last_answer`): a server that answered the controllers needs no ping to show it answers, and a
/// server that stops answering is still pinged within one interval of its last answer. An answer found
/// on waking counts as a ping answered (its watches' failures to reach the server are over).
async fn until_due(
    context: &str,
    readiness: &Readiness,
    pinged: tokio::time::Instant,
    interval: Duration,
    healthy: bool,
    last_answer: impl Fn() -> Option<tokio::time::Instant>,
) {
    let mut shown = pinged;
    loop {
        tokio::time::sleep_until(crate::core::deadline(shown, interval)).await;
        // A cluster whose writes wait for its identity is pinged (and asked) at the interval, answering or not.
        let held = readiness.identities().is_held(context);
        match last_answer() {
            Some(answered) if healthy && answered > shown && !held => {
                shown = answered;
                readiness.pinged(context, None);
            }
            _ => return,
        }
    }
}

/// One ping: a client built for it, and what the API server answered.
async fn once(access: &Access) -> Option<String> {
    match crate::client::own_client(access) {
        Ok(client) => answer(&client).await,
        Err(error) => Some(format!("cannot build a client: {error}")),
    }
}

/// A random point within the first interval, different for every cluster and every process.
fn first_delay(context: &str, interval: Duration) -> Duration {
    use std::hash::BuildHasher;
    let random = std::collections::hash_map::RandomState::new().hash_one(context);
    let millis = u64::try_from(interval.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    Duration::from_millis(random % millis)
}

/// What is wrong with the API server behind `client`, if anything.
async fn answer(client: &kube::Client) -> Option<String> {
    match tokio::time::timeout(PING_TIMEOUT, client.apiserver_version()).await {
        Ok(Ok(_)) => None,
        Ok(Err(kube::Error::Api(status))) if status.code == 401 => Some(REJECTED.to_owned()),
        Ok(Err(error)) if crate::core::is_transport(&error) => Some(crate::core::transport(&error)),
        Ok(Err(error)) => Some(format!("does not answer pings: {}", chain(&error))),
        Err(_) => Some(format!("unreachable: no answer within {PING_TIMEOUT:?}")),
    }
}

#[cfg(test)]
mod tests {
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
}
