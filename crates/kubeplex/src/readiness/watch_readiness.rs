//! One watch's part in its cluster's readiness: what the watch last said (listed, failing, unreachable) and
//! the handle its task reports through, which logs a failure when it changes and then rarely.

use std::sync::Arc;

use kube::runtime::watcher;
use parking_lot::Mutex;

use super::report::WatchReport;
use crate::core::{Line, LogThrottle};

/// What one watch last said about itself.
pub(super) struct WatchState {
    kind: String,
    plural: String,
    namespace: Option<String>,
    synced: bool,
    problem: Option<String>,
    /// The problem is that the server could not be reached (not an answer it gave).
    unreachable: bool,
    /// Which of its failures are worth a `warn` line, with the retries since the last one.
    logged: LogThrottle,
    /// Ends the watch's wait between two attempts: its server answers again.
    wake: Arc<tokio::sync::Notify>,
}

/// How often a problem that persists is logged again.
const REPEAT_LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

impl WatchState {
    /// A watch of `kind` (plural `plural`) in `namespace` or all namespaces, not listed yet.
    pub(super) fn new(kind: String, plural: String, namespace: Option<&str>) -> Self {
        Self {
            kind,
            plural,
            namespace: namespace.map(str::to_owned),
            synced: false,
            problem: None,
            unreachable: false,
            logged: LogThrottle::new(REPEAT_LOG_INTERVAL),
            wake: Arc::default(),
        }
    }

    /// Why it fails, if it does.
    pub(super) fn problem(&self) -> Option<&str> {
        self.problem.as_deref()
    }

    /// Whether it holds its cluster back from ready: not listed yet, or failing.
    pub(super) fn is_ready(&self) -> bool {
        self.synced && self.problem.is_none()
    }

    /// The server answers again: a failure that was only its being unreachable is over (a refusal stays),
    /// and the watch, if it waits to retry, retries now — so that it is connected again, and its
    /// connection's PINGs watch the server, by the time the cluster reads ready.
    pub(super) fn reachable_again(&mut self) {
        if self.unreachable {
            self.unreachable = false;
            self.problem = None;
            self.wake.notify_one();
        }
    }

    pub(super) fn report(&self) -> WatchReport {
        WatchReport {
            kind: self.kind.clone(),
            namespace: self.namespace.clone().unwrap_or_else(|| "*".into()),
            synced: self.synced,
            problem: self.problem.clone(),
        }
    }
}

/// Whether the watch failed only because its resourceVersion expired (410 Gone): a normal relist.
pub(crate) fn is_expired(error: &watcher::Error) -> bool {
    matches!(error, watcher::Error::WatchError(status) if status.code == 410)
}

/// What identifies a watch in the readiness report, to take it out when the watch is closed for good.
pub(crate) struct WatchEntry {
    pub(super) context: String,
    pub(super) state: Arc<Mutex<WatchState>>,
}

/// The handle a watch task reports through.
pub(crate) struct WatchReadiness {
    context: String,
    state: Arc<Mutex<WatchState>>,
    /// Tells the cluster's readiness that this watch changed what it says.
    changed: Box<dyn Fn() + Send + Sync>,
}

impl WatchReadiness {
    /// The handle of the watch `state` in `context`, calling `changed` when what it says changes.
    pub(super) fn new(
        context: &str,
        state: Arc<Mutex<WatchState>>,
        changed: Box<dyn Fn() + Send + Sync>,
    ) -> Self {
        Self {
            context: context.to_owned(),
            state,
            changed,
        }
    }

    /// What `Readiness::forget_watch` takes.
    pub(crate) fn entry(&self) -> WatchEntry {
        WatchEntry {
            context: self.context.clone(),
            state: self.state.clone(),
        }
    }

    /// The initial list (or a relist) completed.
    pub(crate) fn synced(&self) {
        self.set(|s| {
            let changed = !s.synced || s.problem.is_some();
            s.synced = true;
            s.problem = None;
            s.unreachable = false;
            changed
        });
    }

    /// An object arrived: whatever failed before works again.
    pub(crate) fn working(&self) {
        self.set(|s| {
            s.unreachable = false;
            s.problem.take().is_some()
        });
    }

    /// The watch failed; it retries with backoff. Its cluster's outage is logged once for all its watches
    /// (see `outage.rs`); this watch's own line is `debug`, when the problem changes and then at most once
    /// a minute with the number of retries since.
    pub(crate) fn failed(&self, error: &watcher::Error) {
        if is_expired(error) {
            // 410 Gone: the resourceVersion is too old and the watcher relists, as it should.
            tracing::debug!(cluster = %self.context, "watch expired; relisting");
            return;
        }
        let mut state = self.state.lock();
        let place = crate::core::WatchPlace {
            kind: &state.kind,
            plural: &state.plural,
            namespace: state.namespace.as_deref(),
        };
        let problem = crate::core::watch_failure(error, &place);
        state.unreachable = matches!(
            error,
            watcher::Error::InitialListFailed(e)
                | watcher::Error::WatchStartFailed(e)
                | watcher::Error::WatchFailed(e) if crate::core::is_transport(e)
        );
        let changed = state.problem.replace(problem.clone()).as_ref() != Some(&problem);
        if changed {
            // Over in between (listed, or an object came) counts as changed too.
            state.logged.reset();
        }
        let line = state.logged.line(&problem);
        // Each of a cluster's watches fails on its own: the line names which.
        let kind = state.kind.clone();
        let namespace = state.namespace.clone().unwrap_or_default();
        drop(state);
        match line {
            Line::New => {
                tracing::debug!(cluster = %self.context, %kind, %namespace, %problem, "watch failed; retrying with backoff");
            }
            Line::Again { repeats: retries } => {
                tracing::debug!(cluster = %self.context, %kind, %namespace, %problem, retries, "watch still failing");
            }
            Line::Quiet => {}
        }
        if changed {
            (self.changed)();
        }
    }

    /// Waits `delay` before the watch's next attempt, or less: until its server answers again.
    pub(crate) async fn retry_after(&self, delay: std::time::Duration) {
        let wake = self.state.lock().wake.clone();
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = wake.notified() => {}
        }
    }

    fn set(&self, change: impl FnOnce(&mut WatchState) -> bool) {
        let changed = change(&mut self.state.lock());
        if changed {
            (self.changed)();
        }
    }
}
