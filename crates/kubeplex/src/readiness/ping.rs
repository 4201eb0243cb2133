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
mod tests;
