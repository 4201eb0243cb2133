//! Per-cluster readiness: what the probes report, what `wait_started` waits for, and which clusters stop or
//! start answering.
//!
//! A cluster is *ready* when its client could be configured, its API server answers, and every watch the
//! controllers need there has listed its objects and is not failing. The manager has *started* once every
//! required context was ready at the same time; from then on only readiness changes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use parking_lot::Mutex;
use tokio::sync::{Notify, broadcast};

use super::cluster_entry::ClusterEntry;
use super::identities::{Asked, Identities, Refusal};
use super::phases::{MemberPhases, Phase};
use super::report::{
    ClusterReadiness, ClusterReport, LeadershipReport, ReadinessReport, ShardingReport,
};
use super::watch_readiness::{WatchEntry, WatchReadiness, WatchState};
use crate::core::Error;

/// Shared readiness state, updated by the pool, the watches and the pings.
#[derive(Default)]
pub(crate) struct Readiness {
    contexts: Mutex<BTreeMap<String, ClusterEntry>>,
    /// Controllers whose loop ended while the manager was running, and why: the process is half-dead.
    dead_controllers: Mutex<BTreeMap<String, String>>,
    started: AtomicBool,
    /// Required contexts not ready now: `started` latches when it reaches 0, without a whole report.
    not_ready_required: AtomicUsize,
    /// A required context cannot be configured: the manager cannot start.
    fatal: AtomicBool,
    /// Every watch is known (the manager has registered its controllers): until then a cluster without
    /// watches yet would count as ready.
    armed: AtomicBool,
    changed: Notify,
    leadership: Mutex<Option<LeadershipReport>>,
    sharding: Mutex<Option<ShardingReport>>,
    phases: MemberPhases,
    flips: Flips,
    identities: Identities,
}

/// How many flips a slow follower may fall behind before it is told it lagged.
const FLIPS_KEPT: usize = 256;

/// The clusters whose readiness flipped, by name, for the controllers whose parents' status follows it.
struct Flips(broadcast::Sender<String>);

impl Default for Flips {
    fn default() -> Self {
        Self(broadcast::channel(FLIPS_KEPT).0)
    }
}

impl Readiness {
    /// Declares a cluster, required or not; it is "connecting" until [`Readiness::connected`].
    pub(crate) fn declare(&self, context: &str, required: bool) {
        let mut contexts = self.contexts.lock();
        let entry = contexts.entry(context.to_owned()).or_default();
        if required && !entry.required {
            self.not_ready_required.fetch_add(1, Ordering::AcqRel);
            entry.ready = false;
        }
        entry.required |= required;
        entry.connecting = true;
    }

    /// Declares one of the code's contexts (not a member), required or not: see [`Readiness::declare`].
    pub(crate) fn declare_fixed(&self, context: &str, required: bool) {
        self.declare(context, required);
        if let Some(entry) = self.contexts.lock().get_mut(context) {
            entry.fixed = true;
        }
    }

    /// The contexts declared with [`Readiness::declare_fixed`]: the names the terse probe body may show.
    pub(crate) fn fixed_contexts(&self) -> std::collections::BTreeSet<String> {
        let contexts = self.contexts.lock();
        let fixed = contexts.iter().filter(|(_, entry)| entry.fixed);
        fixed.map(|(name, _)| name.clone()).collect()
    }

    /// Which cluster each name reaches, and the gates of their writes.
    pub(crate) fn identities(&self) -> &Identities {
        &self.identities
    }

    /// Records what cluster `name` answered it is: its entry shows it, and every name whose refusal
    /// changed with it (it, or another name for the same cluster) is judged again.
    pub(crate) fn identified(&self, name: &str, asked: Asked) {
        let answered = !matches!(asked, Asked::NoAnswer(_));
        let settled = self.identities.record(name, asked);
        let identity = self.identities.of(name);
        self.update(name, |entry| {
            entry.identity = identity;
            entry.identifying &= !answered;
        });
        self.refusals_changed(settled);
    }

    /// `name` is being asked which cluster it is: it is not ready until it answers.
    pub(crate) fn identifying(&self, name: &str) {
        self.update(name, |entry| entry.identifying = true);
    }

    fn refusals_changed(&self, settled: Vec<Refusal>) {
        for (name, refused) in settled {
            self.update(&name, |entry| entry.refused = refused);
        }
    }

    /// Forgets a cluster for good (a member that left): it leaves the report, and a name refused for
    /// reaching the same cluster may be written to now.
    pub(crate) fn forget_context(&self, context: &str) {
        let settled = self.identities.forget(context);
        self.refusals_changed(settled);
        let mut contexts = self.contexts.lock();
        if let Some(entry) = contexts.remove(context)
            && entry.required
            && !entry.ready
        {
            self.not_ready_required.fetch_sub(1, Ordering::AcqRel);
        }
        drop(contexts);
        self.changed.notify_waiters();
    }

    /// The pool has built the cluster's client, or failed to (`error`).
    pub(crate) fn connected(&self, context: &str, error: Option<&Error>) {
        self.update(context, |entry| {
            entry.connecting = false;
            entry.config_error = error.map(ToString::to_string);
        });
        if error.is_some()
            && self
                .contexts
                .lock()
                .get(context)
                .is_some_and(|e| e.required)
        {
            self.fatal.store(true, Ordering::Release);
        }
    }

    /// Records a ping's outcome. A server that answers is no longer unreachable for its watches either: a
    /// watch that resumes after an outage says nothing until an object changes (kube's watcher emits nothing
    /// when its retry connects), so without this a quiet namespace would keep a healed cluster failing.
    pub(crate) fn pinged(&self, context: &str, problem: Option<String>) {
        let answers = problem.is_none();
        self.update(context, |entry| {
            entry.unreachable = problem;
            if answers {
                for watch in &entry.watches {
                    watch.lock().reachable_again();
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
    ) -> WatchReadiness {
        let state = Arc::new(Mutex::new(WatchState::new(kind, plural, namespace)));
        self.update(context, |entry| entry.watches.push(state.clone()));
        let (readiness, name) = (self.clone(), context.to_owned());
        WatchReadiness::new(
            context,
            state,
            Box::new(move || readiness.watch_changed(&name)),
        )
    }

    /// Takes a watch closed for good (its shard moved to another replica) out of its cluster's report.
    pub(crate) fn forget_watch(&self, watch: &WatchEntry) {
        self.update(&watch.context, |entry| {
            entry.watches.retain(|w| !Arc::ptr_eq(w, &watch.state));
        });
    }

    /// A controller's loop ended while the manager was running: `/livez` fails from now on, naming it.
    pub(crate) fn controller_ended(&self, controller: &str, reason: String) {
        self.dead_controllers
            .lock()
            .insert(controller.to_owned(), reason);
        self.changed.notify_waiters();
    }

    /// Why the process is not alive: each controller whose loop ended unexpectedly, with the reason.
    pub(crate) fn liveness_problems(&self) -> BTreeMap<String, String> {
        self.dead_controllers.lock().clone()
    }

    /// The report the probes serve; latches `started` the first time every required context is ready.
    pub(crate) fn report(&self) -> ReadinessReport {
        let contexts = self.contexts.lock();
        let mut contexts: BTreeMap<String, ClusterReport> = contexts
            .iter()
            .map(|(name, entry)| (name.clone(), entry.report(name)))
            .collect();
        self.phases.annotate(&mut contexts);
        let ready = contexts
            .values()
            .filter(|c| c.required)
            .all(|c| c.status == ClusterReadiness::Ready);
        let started = self.started.fetch_or(ready, Ordering::AcqRel) || ready;
        let leadership = self.leadership.lock().clone();
        ReadinessReport {
            started,
            ready,
            clusters: contexts,
            leadership,
            sharding: self.sharding(),
        }
    }

    /// Records this replica's place in the leader election.
    pub(crate) fn set_leadership(&self, report: LeadershipReport) {
        *self.leadership.lock() = Some(report);
        self.changed.notify_waiters();
    }

    /// This replica's place in sharded mode, as last recorded.
    pub(crate) fn sharding(&self) -> Option<ShardingReport> {
        self.sharding.lock().clone()
    }

    /// Records this replica's place in sharded mode.
    pub(crate) fn set_sharding(&self, report: ShardingReport) {
        *self.sharding.lock() = Some(report);
        self.changed.notify_waiters();
    }

    /// Configuration errors of required contexts: the manager cannot start while there are any.
    pub(crate) fn fatal_errors(&self) -> Vec<String> {
        let contexts = self.contexts.lock();
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

    /// Member `name` is now in `phase`; `None`: it is no member any more.
    pub(crate) fn member_phase(&self, name: &str, phase: Option<Phase>) {
        self.phases.set(name, phase);
    }

    /// Member `name`'s phase.
    pub(crate) fn phase_of(&self, name: &str) -> Option<Phase> {
        self.phases.get(name)
    }

    /// One of `context`'s watches changed what it says: the cluster is judged again.
    fn watch_changed(&self, context: &str) {
        self.update(context, |_| {});
    }

    /// Changes a declared cluster; one not declared, or forgotten, is left out: a member's ping or watch
    /// that reports after its leave (its task aborted mid-poll on another thread) must not bring it back.
    fn update(&self, context: &str, change: impl FnOnce(&mut ClusterEntry)) {
        let mut contexts = self.contexts.lock();
        let Some(entry) = contexts.get_mut(context) else {
            return;
        };
        let before = entry.ready;
        change(entry);
        self.judge(entry);
        let flipped = entry.ready != before && entry.was_ready;
        // Ready with its watches listed: a cluster without watches yet is ready only until they start.
        entry.was_ready |= entry.ready && !entry.watches.is_empty();
        let outage = entry.outage();
        let line = entry.outages.follow(outage);
        drop(contexts);
        if let Some(line) = line {
            line.log(context);
        }
        if flipped {
            // No follower (no controller yet, or none left) is no error.
            let _ = self.flips.0.send(context.to_owned());
        }
        self.changed.notify_waiters();
    }

    /// The clusters whose readiness flips from now on: one that stops answering (or whose watches fail),
    /// and one that answers again. A cluster's first readiness is no flip.
    pub(crate) fn flips(&self) -> broadcast::Receiver<String> {
        self.flips.0.subscribe()
    }

    /// After a change of `entry`: whether it is ready now, kept in the count of required contexts not ready,
    /// and `started` latched when that count is 0. O(the cluster's watches), not O(clusters).
    fn judge(&self, entry: &mut ClusterEntry) {
        let ready = entry.is_ready();
        if entry.required && ready != entry.ready {
            if ready {
                self.not_ready_required.fetch_sub(1, Ordering::AcqRel);
            } else {
                self.not_ready_required.fetch_add(1, Ordering::AcqRel);
            }
        }
        entry.ready = ready;
        self.latch();
    }

    /// Latches `started` when armed and no required context is not ready.
    fn latch(&self) {
        if self.armed.load(Ordering::Acquire)
            && self.not_ready_required.load(Ordering::Acquire) == 0
        {
            self.started.store(true, Ordering::Release);
        }
    }

    /// Every context and watch is declared: from now on `started` can latch as they change.
    pub(crate) fn arm(&self) {
        self.armed.store(true, Ordering::Release);
        self.latch();
        self.changed.notify_waiters();
    }

    /// Whether `context` is ready now (client configured, API server answering, every watch listed); a
    /// cluster never declared (a member not yet joined) is not.
    pub(crate) fn is_context_ready(&self, context: &str) -> bool {
        let contexts = self.contexts.lock();
        contexts.get(context).is_some_and(|entry| entry.ready)
    }

    /// Whether `name` is a declared cluster (a context, or a member that joined and has not left), ready
    /// or not: what a webhook asks per request, without building the whole report.
    pub(crate) fn knows(&self, name: &str) -> bool {
        self.contexts.lock().contains_key(name)
    }

    /// Whether every required context has been ready at once (latched); O(1).
    pub(crate) fn is_started(&self) -> bool {
        self.started.load(Ordering::Acquire)
    }

    /// Whether a required context cannot be configured; O(1).
    pub(crate) fn has_fatal_errors(&self) -> bool {
        self.fatal.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests;
