//! The manager's side of a member provider: each reported change becomes a client, an entry in `/readyz`,
//! pings, and the controllers' watches; a leave runs the leave policy before the member is forgotten.
//!
//! Each member's changes are carried out in the order reported; different members' side by side, at most
//! [`MemberRunner::at_once`] at work at once (see [`MemberChanges`]). A join that failed for a cause that
//! may pass is tried again as the member's next change, after a backoff (see [`JoinRetries`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::change::Changes;
use super::join_retries::JoinRetries;
use crate::client::PoolConfig;
use crate::members::{
    Change, Command, FixedClients, KubeconfigAllowlist, LeavePolicy, MemberChanges, MemberProvider,
    MemberSink,
};
use crate::readiness::{Phase, Pings};
use crate::runtime::Runtime;

/// How many provider changes may wait for the runner to take them.
pub(in crate::manager) const COMMANDS_WAITING: usize = 64;
/// How many rejected members may wait to be read again.
const RELOADS_WAITING: usize = 64;
/// After a reload, how long a member whose credentials are still rejected is only reported, not reloaded
/// again: a provider with nothing new would otherwise be asked in a loop.
const RELOAD_AGAIN_AFTER: Duration = Duration::from_secs(300);
/// How long a provider that never says it has reported its members is waited for.
const LISTED_AT_THE_LATEST: Duration = Duration::from_secs(60);
/// A change that has waited (to start, or to end) this long is logged, naming what it waits for.
const SLOW_AFTER: Duration = Duration::from_secs(10);
/// And again at most this often while it still waits.
const SLOW_AGAIN_AFTER: Duration = Duration::from_secs(300);

/// What the runner needs besides the commands.
pub(in crate::manager) struct MemberRunner {
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) pool: PoolConfig,
    pub(crate) pings: Arc<Pings>,
    pub(crate) policy: LeavePolicy,
    /// The fixed contexts: a member never takes one's name.
    pub(crate) fixed: Vec<String>,
    /// How many joins and leaves may be at work at once.
    pub(crate) at_once: usize,
    /// After how long a leave stops waiting for a member that does not answer (`None`: never).
    pub(crate) give_up_after: Option<Duration>,
    /// What member kubeconfigs may contain beyond inline credentials.
    pub(crate) allowlist: KubeconfigAllowlist,
}

impl MemberRunner {
    /// Runs `provider` and this runner as background tasks of the manager.
    pub(crate) fn start(self, provider: Box<dyn MemberProvider>, tasks: &mut JoinSet<()>) {
        let (commands, received) = mpsc::channel(COMMANDS_WAITING);
        let runtime = self.runtime.clone();
        let clients: FixedClients = Arc::new(move |context: &str| runtime.pool.client(context));
        let (reload, reloads) = mpsc::channel(RELOADS_WAITING);
        let (rejections, rejected) = mpsc::channel(RELOADS_WAITING);
        self.pings.tell_rejections(rejections);
        let sink = MemberSink::new(commands, clients, self.policy)
            .with_reloads(reloads)
            .with_allowlist(self.allowlist.clone());
        tasks.spawn(provider.run(sink));
        tasks.spawn(self.run(received, rejected, reload));
    }

    /// Carries out the provider's changes until it stops reporting and every change has ended; a member
    /// whose credentials are `rejected` is named to `reload` once (then again at most every
    /// [`RELOAD_AGAIN_AFTER`]).
    pub(crate) async fn run(
        self,
        mut commands: mpsc::Receiver<Command>,
        mut rejected: mpsc::Receiver<String>,
        reload: mpsc::Sender<String>,
    ) {
        let runtime = self.runtime.clone();
        let shared = Arc::new(Changes {
            runtime: self.runtime,
            pool: self.pool,
            pings: self.pings,
            policy: self.policy,
            fixed: self.fixed,
            give_up_after: self.give_up_after,
            problems: Default::default(),
            may_retry: Default::default(),
        });
        let mut retries = JoinRetries::default();
        let mut changes = MemberChanges::new(self.at_once);
        let mut reloaded: BTreeMap<String, Instant> = BTreeMap::new();
        let mut slow: BTreeMap<(String, &'static str), Instant> = BTreeMap::new();
        let listed_at_the_latest = tokio::time::sleep(LISTED_AT_THE_LATEST);
        tokio::pin!(listed_at_the_latest);
        let mut look = tokio::time::interval(SLOW_AFTER / 2);
        look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut open = true;
        loop {
            changes.start(|name, change, slot| {
                let (shared, name) = (shared.clone(), name.to_owned());
                Box::pin(async move {
                    match change {
                        Change::Join(config) => shared.join(name, config, slot).await,
                        Change::Unhealthy(reason) => {
                            shared.unhealthy(&name, reason);
                            shared
                                .runtime
                                .metrics
                                .member_changes()
                                .ended("unhealthy", "done");
                        }
                        Change::Leave(done) => shared.leave(name, slot, done).await,
                    }
                })
            });
            runtime
                .metrics
                .member_changes()
                .now(changes.at_work(), changes.waiting());
            if !open && changes.waiting() == 0 && changes.at_work() == 0 && !changes.busy() {
                return;
            }
            let retry_due = retries.next_due();
            tokio::select! {
                command = commands.recv(), if open => match command {
                    Some(command) => {
                        self::push(&runtime, &mut changes, command, &mut reloaded, &mut retries)
                    }
                    None => open = false,
                },
                Some(name) = rejected.recv() => {
                    let recently = reloaded.get(&name).is_some_and(|at| at.elapsed() < RELOAD_AGAIN_AFTER);
                    if !recently && runtime.members.client(&name).is_some() {
                        tracing::warn!(cluster = %name, "member's credentials were rejected: asking its provider to read them again");
                        reloaded.insert(name.clone(), Instant::now());
                        let _ = reload.try_send(name);
                    }
                }
                ended = changes.next() => if let Some(ended) = ended {
                    slow.remove(&(ended.member.clone(), ended.kind));
                    let failed = shared.may_retry.lock().remove(&ended.member);
                    match failed {
                        // Unless a newer change of the member waits: that one supersedes it.
                        Some((config, cause)) if !ended.cancelled && !changes.has(&ended.member) => {
                            retries.failed(&ended.member, config, &cause);
                        }
                        Some(_) => retries.superseded(&ended.member),
                        None if ended.kind == "join" && !ended.cancelled => {
                            retries.ended(&ended.member)
                        }
                        None => {}
                    }
                    if ended.cancelled {
                        tracing::info!(cluster = %ended.member, change = ended.kind, "member change cancelled: a later change supersedes it");
                        runtime.metrics.member_changes().ended(ended.kind, "cancelled");
                    }
                },
                () = &mut listed_at_the_latest, if !runtime.members.is_settled() => {
                    tracing::warn!(after = ?LISTED_AT_THE_LATEST, "the member provider has not said it reported its members: deletions no longer wait for it");
                    runtime.members.settle();
                }
                _ = look.tick() => log_slow(&runtime, &changes, &mut slow),
                () = until(retry_due) => {
                    for (member, config) in retries.take_due() {
                        changes.push(&member, Change::Join(config));
                    }
                }
            }
        }
    }
}

/// Takes one command of the provider.
fn push(
    runtime: &Runtime,
    changes: &mut MemberChanges<Box<kube::Config>>,
    command: Command,
    reloaded: &mut BTreeMap<String, Instant>,
    retries: &mut JoinRetries,
) {
    let (name, change) = match command {
        Command::Join { name, config } => {
            if !runtime.members.contains(&name) {
                // Known from now on: a parent's deletion waits for it, and /readyz shows it.
                runtime.members.expect(&name, true);
                runtime.readiness.declare(&name, false);
                let why = match changes.has(&name) {
                    true => "its earlier change to end",
                    false => "a free slot: as many member changes as allowed are at work",
                };
                if runtime.readiness.phase_of(&name).is_none() {
                    runtime
                        .readiness
                        .member_phase(&name, Some(Phase::Queued(why.to_owned())));
                }
            }
            (name, Change::Join(config))
        }
        Command::Unhealthy { name, reason } => (name, Change::Unhealthy(reason)),
        Command::Leave { name, done } => {
            reloaded.remove(&name);
            retries.ended(&name);
            (name, Change::Leave(vec![done]))
        }
        Command::Listed => {
            if !runtime.members.is_settled() {
                tracing::info!("the member provider has reported its members");
                runtime.members.settle();
            }
            return;
        }
    };
    if let Change::Join(_) | Change::Unhealthy(_) = change {
        // The provider's word on the member is newer than a join the runner would try again.
        retries.superseded(&name);
    }
    changes.push(&name, change);
}

/// Resolves at `at`; never without one.
async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Logs each change that has waited longer than [`SLOW_AFTER`], naming what it waits for; again at most
/// every [`SLOW_AGAIN_AFTER`].
fn log_slow(
    runtime: &Runtime,
    changes: &MemberChanges<Box<kube::Config>>,
    slow: &mut BTreeMap<(String, &'static str), Instant>,
) {
    let now = Instant::now();
    let overdue = changes.overdue(SLOW_AFTER);
    slow.retain(|(member, kind), _| {
        overdue
            .iter()
            .any(|o| o.member == *member && o.kind == *kind)
    });
    for change in overdue {
        let key = (change.member.clone(), change.kind);
        if slow
            .get(&key)
            .is_some_and(|at| now.duration_since(*at) < SLOW_AGAIN_AFTER)
        {
            continue;
        }
        slow.insert(key, now);
        let waits_for = match (change.running, change.kind) {
            (false, _) => "its turn: its member's earlier change, or a free slot".to_owned(),
            (true, "leave") => {
                let leaving = runtime.members.leaving().into_iter();
                let why = leaving
                    .filter(|(name, _)| *name == change.member)
                    .find_map(|(_, why)| why);
                why.unwrap_or_else(|| "the controllers to carry out the leave policy".to_owned())
            }
            (true, _) => "the controllers to open its watches".to_owned(),
        };
        tracing::warn!(cluster = %change.member, change = change.kind, waited = ?change.waited, %waits_for, "member change is taking long");
    }
}

#[cfg(test)]
mod tests;
