//! Per-context health: what the probes report and what `wait_started` waits for.
//!
//! A context is *ready* when its client could be configured, its API server answers, and every watch the
//! controllers need there has listed its objects and is not failing. The manager has *started* once every
//! required context was ready at the same time; from then on only readiness changes.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use kube::runtime::watcher;
use serde::Serialize;
use tokio::sync::Notify;

use crate::error::{Error, chain};

/// The health of a manager's contexts, as `/startupz`, `/readyz` and [`Running::health`](crate::Running::health)
/// report it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HealthReport {
    /// Every required context has been ready at once (it stays true after that).
    pub started: bool,
    /// Every required context is ready now.
    pub ready: bool,
    /// Each context any registered controller declared, by name.
    pub contexts: BTreeMap<String, ContextReport>,
    /// With leader election: whether this replica leads, and who does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leadership: Option<LeadershipReport>,
}

/// This replica's place in the leader election.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LeadershipReport {
    /// This replica's identity in the Lease.
    pub identity: String,
    /// `leader` (its controllers run) or `standby` (watches warm, ready to take over).
    pub role: &'static str,
    /// Who holds the Lease, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
}

/// The health of one context.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ContextReport {
    /// Whether the manager waits for this context to start (the default) or runs degraded without it.
    pub required: bool,
    /// Where the context stands.
    pub status: ContextStatus,
    /// Why it is not ready, each reason naming the context, e.g. `context cluster-b: unreachable: ...`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// Each watch the controllers opened in this context.
    pub watches: Vec<WatchReport>,
}

/// Where a context stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ContextStatus {
    /// Reachable, authorised, and every watch has synced.
    Ready,
    /// Nothing has failed, but not every watch has listed its objects yet.
    Starting,
    /// Something failed; see the reasons.
    Failing,
}

/// The health of one watch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WatchReport {
    /// `Kind.group/version`, e.g. `Deployment.apps/v1`.
    pub kind: String,
    /// The namespace watched, or `*` for all.
    pub namespace: String,
    /// Whether the initial list has completed.
    pub synced: bool,
    /// The current failure, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// Shared health state, updated by the pool, the watches and the pings.
#[derive(Default)]
pub(crate) struct Health {
    contexts: Mutex<BTreeMap<String, ContextEntry>>,
    /// Controllers whose loop ended while the manager was running, and why: the process is half-dead.
    dead_controllers: Mutex<BTreeMap<String, String>>,
    started: AtomicBool,
    changed: Notify,
    leadership: Mutex<Option<LeadershipReport>>,
}

#[derive(Default)]
struct ContextEntry {
    required: bool,
    /// The pool could not configure a client: no watch or ping will run.
    config_error: Option<String>,
    /// The pool has not connected yet.
    connecting: bool,
    /// The last ping failed.
    unreachable: Option<String>,
    watches: Vec<Arc<Mutex<WatchState>>>,
}

struct WatchState {
    kind: String,
    plural: String,
    namespace: Option<String>,
    synced: bool,
    problem: Option<String>,
    /// The problem is that the server could not be reached (not an answer it gave).
    unreachable: bool,
    /// Retries of the same problem since it was last logged, and when that was.
    retries: u32,
    logged: Option<std::time::Instant>,
}

/// How often a problem that persists is logged again.
const REPEAT_LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether the watch failed only because its resourceVersion expired (410 Gone): a normal relist.
pub(crate) fn is_expired(error: &watcher::Error) -> bool {
    matches!(error, watcher::Error::WatchError(status) if status.code == 410)
}

/// The handle a watch task reports through.
pub(crate) struct WatchHealth {
    context: String,
    state: Arc<Mutex<WatchState>>,
    health: Arc<Health>,
}

impl Health {
    /// Declares a context, required or not; it is "connecting" until [`Health::connected`].
    pub(crate) fn declare(&self, context: &str, required: bool) {
        let mut contexts = self.lock();
        let entry = contexts.entry(context.to_owned()).or_default();
        entry.required |= required;
        entry.connecting = true;
    }

    /// The pool has built the context's client, or failed to (`error`).
    pub(crate) fn connected(&self, context: &str, error: Option<&Error>) {
        self.update(context, |entry| {
            entry.connecting = false;
            entry.config_error = error.map(ToString::to_string);
        });
    }

    /// Records a ping's outcome. A server that answers is no longer unreachable for its watches either: a
    /// watch that resumes after an outage says nothing until an object changes (kube's watcher emits nothing
    /// when its retry connects), so without this a quiet namespace would keep a healed context failing.
    pub(crate) fn pinged(&self, context: &str, problem: Option<String>) {
        let answers = problem.is_none();
        self.update(context, |entry| {
            entry.unreachable = problem;
            if answers {
                for watch in &entry.watches {
                    let mut watch = watch.lock().unwrap_or_else(|e| e.into_inner());
                    if watch.unreachable {
                        watch.unreachable = false;
                        watch.problem = None;
                    }
                }
            }
        });
    }

    /// Registers a new watch of `kind` (`Kind.group/version`, plural `plural`) in `context`, in `namespace`
    /// or all namespaces.
    pub(crate) fn watch_started(
        self: &Arc<Self>,
        context: &str,
        namespace: Option<&str>,
        kind: String,
        plural: String,
    ) -> WatchHealth {
        let state = Arc::new(Mutex::new(WatchState {
            kind,
            plural,
            namespace: namespace.map(str::to_owned),
            synced: false,
            problem: None,
            unreachable: false,
            retries: 0,
            logged: None,
        }));
        self.update(context, |entry| entry.watches.push(state.clone()));
        WatchHealth {
            context: context.to_owned(),
            state,
            health: self.clone(),
        }
    }

    /// A controller's loop ended while the manager was running: `/livez` fails from now on, naming it.
    pub(crate) fn controller_ended(&self, controller: &str, reason: String) {
        self.dead_controllers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(controller.to_owned(), reason);
        self.changed.notify_waiters();
    }

    /// Why the process is not alive: each controller whose loop ended unexpectedly, with the reason.
    pub(crate) fn liveness_problems(&self) -> BTreeMap<String, String> {
        self.dead_controllers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The report the probes serve; latches `started` the first time every required context is ready.
    pub(crate) fn report(&self) -> HealthReport {
        let contexts = self.lock();
        let contexts: BTreeMap<String, ContextReport> = contexts
            .iter()
            .map(|(name, entry)| (name.clone(), entry.report(name)))
            .collect();
        let ready = contexts
            .values()
            .filter(|c| c.required)
            .all(|c| c.status == ContextStatus::Ready);
        let started = self.started.fetch_or(ready, Ordering::AcqRel) || ready;
        let leadership = self
            .leadership
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        HealthReport {
            started,
            ready,
            contexts,
            leadership,
        }
    }

    /// Records this replica's place in the leader election.
    pub(crate) fn set_leadership(&self, report: LeadershipReport) {
        *self.leadership.lock().unwrap_or_else(|e| e.into_inner()) = Some(report);
        self.changed.notify_waiters();
    }

    /// Configuration errors of required contexts: the manager cannot start while there are any.
    pub(crate) fn fatal_errors(&self) -> Vec<String> {
        let contexts = self.lock();
        contexts
            .values()
            .filter(|e| e.required)
            .filter_map(|e| e.config_error.clone())
            .collect()
    }

    /// Resolves at the next change of any state.
    pub(crate) fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    fn update(&self, context: &str, change: impl FnOnce(&mut ContextEntry)) {
        change(self.lock().entry(context.to_owned()).or_default());
        self.changed.notify_waiters();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, ContextEntry>> {
        self.contexts.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl ContextEntry {
    fn report(&self, name: &str) -> ContextReport {
        let watches: Vec<WatchReport> = self
            .watches
            .iter()
            .map(|w| {
                let w = w.lock().unwrap_or_else(|e| e.into_inner());
                WatchReport {
                    kind: w.kind.clone(),
                    namespace: w.namespace.clone().unwrap_or_else(|| "*".into()),
                    synced: w.synced,
                    problem: w.problem.clone(),
                }
            })
            .collect();
        let mut reasons: Vec<String> = Vec::new();
        if let Some(error) = &self.config_error {
            reasons.push(error.clone());
        }
        if let Some(problem) = &self.unreachable {
            reasons.push(format!("context {name}: {problem}"));
        }
        for watch in &watches {
            if let Some(problem) = &watch.problem
                && !reasons.iter().any(|r| r.ends_with(problem.as_str()))
            {
                reasons.push(format!("context {name}: {problem}"));
            }
        }
        let status = if !reasons.is_empty() {
            ContextStatus::Failing
        } else if self.connecting || watches.iter().any(|w| !w.synced) {
            ContextStatus::Starting
        } else {
            ContextStatus::Ready
        };
        ContextReport {
            required: self.required,
            status,
            reasons,
            watches,
        }
    }
}

impl WatchHealth {
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

    /// The watch failed; it retries with backoff. Logged when the problem changes, then at most once a
    /// minute with the number of retries since, so a cluster down for an hour costs a line a minute.
    pub(crate) fn failed(&self, error: &watcher::Error) {
        if is_expired(error) {
            // 410 Gone: the resourceVersion is too old and the watcher relists, as it should.
            tracing::debug!(context = %self.context, "watch expired; relisting");
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let problem = describe(error, &state);
        state.unreachable = matches!(
            error,
            watcher::Error::InitialListFailed(e)
                | watcher::Error::WatchStartFailed(e)
                | watcher::Error::WatchFailed(e) if crate::trouble::is_transport(e)
        );
        let changed = state.problem.replace(problem.clone()).as_ref() != Some(&problem);
        let now = std::time::Instant::now();
        if changed {
            state.retries = 0;
            state.logged = Some(now);
            drop(state);
            tracing::warn!(context = %self.context, %problem, "watch failed; retrying with backoff");
            self.health.changed.notify_waiters();
            return;
        }
        state.retries += 1;
        let due = state
            .logged
            .is_none_or(|at| now.duration_since(at) >= REPEAT_LOG_INTERVAL);
        if due {
            state.logged = Some(now);
            let retries = std::mem::take(&mut state.retries);
            drop(state);
            tracing::warn!(context = %self.context, %problem, retries, "watch still failing");
        } else {
            tracing::debug!(context = %self.context, %problem, "watch still failing");
        }
    }

    fn set(&self, change: impl FnOnce(&mut WatchState) -> bool) {
        let changed = change(&mut self.state.lock().unwrap_or_else(|e| e.into_inner()));
        if changed {
            self.health.changed.notify_waiters();
        }
    }
}

/// A watch failure in the words an operator's on-call needs: which verb, resource and namespace, or why
/// the server could not be reached.
fn describe(error: &watcher::Error, watch: &WatchState) -> String {
    let place = match &watch.namespace {
        Some(namespace) => format!("namespace {namespace}"),
        None => "all namespaces".into(),
    };
    let (verb, source) = match error {
        watcher::Error::InitialListFailed(source) => ("list", source),
        watcher::Error::WatchStartFailed(source) | watcher::Error::WatchFailed(source) => {
            ("watch", source)
        }
        watcher::Error::WatchError(status) => {
            return format!(
                "watch of {} in {place} failed: {} ({})",
                watch.plural, status.message, status.code
            );
        }
        watcher::Error::NoResourceVersion => {
            return format!(
                "kind {} returned no resourceVersion: it cannot be watched",
                watch.kind
            );
        }
    };
    match source {
        kube::Error::Api(status) => match status.code {
            401 => "credentials were rejected (401 Unauthorized)".into(),
            403 => format!(
                "user may not {verb} {} in {place} (403 Forbidden)",
                watch.plural
            ),
            404 => format!("kind {} is not served", watch.kind),
            code => format!(
                "{verb} {} in {place} failed: {} ({code})",
                watch.plural, status.message
            ),
        },
        error if crate::trouble::is_transport(error) => crate::trouble::transport(error),
        other => format!(
            "{verb} {} in {place} failed: {}",
            watch.plural,
            chain(other)
        ),
    }
}

#[cfg(test)]
#[path = "health_tests.rs"]
mod tests;
