//! The order in which a provider's changes are carried out: each member's in the order reported (join, a
//! credential change, a leave), different members' side by side, at most a bounded number at work at once.
//!
//! A change that supersedes one still waiting for the same member replaces it: a newer join (newer
//! credentials) the older join, a leave every join or problem before it, and a leave of a member still
//! joining cancels that join. A change that only waits (a leave for a member that does not answer) can
//! [`park`](Slot::park): it keeps its place in its member's order, but no longer takes one of the slots.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::{Notify, oneshot};
use tokio::task::{AbortHandle, Id, JoinSet};
use tokio::time::Instant;

use crate::core::Shrink;

/// How many changes may be at work at once unless the manager says otherwise.
pub(crate) const DEFAULT_MEMBER_CHANGES_AT_ONCE: usize = 16;

/// How a member's leave ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaveOutcome {
    /// The leave policy was carried out: its children are deleted (or orphaned, as the policy says).
    Done,
    /// Its children could not be deleted (the member did not answer) until the manager gave up on them:
    /// they were left behind; the text says why.
    Abandoned(String),
}

/// One change a provider reported for a member; `J` is what a join carries.
pub(crate) enum Change<J> {
    Join(J),
    Unhealthy(String),
    /// Answered, every sender, once the member has left.
    Leave(Vec<oneshot::Sender<LeaveOutcome>>),
}

impl<J> Change<J> {
    /// The change's name in logs and metrics.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Change::Join(_) => "join",
            Change::Unhealthy(_) => "unhealthy",
            Change::Leave(_) => "leave",
        }
    }
}

/// A running change's hold on a slot; [`park`](Self::park) gives the slot back while it only waits.
#[derive(Clone)]
#[cfg_attr(test, derive(Default))]
pub(crate) struct Slot {
    parked: Arc<AtomicBool>,
    wake: Arc<Notify>,
}

impl Slot {
    /// The change now only waits (on a member that does not answer): another may take its slot.
    pub(crate) fn park(&self) {
        if !self.parked.swap(true, Ordering::AcqRel) {
            self.wake.notify_one();
        }
    }
}

/// A change at work.
struct AtWork {
    kind: &'static str,
    started: Instant,
    abort: AbortHandle,
    slot: Slot,
}

/// A change that ended (or was cancelled).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Ended {
    pub(crate) member: String,
    pub(crate) kind: &'static str,
    /// Cancelled by a change that superseded it.
    pub(crate) cancelled: bool,
    pub(crate) took: Duration,
}

/// A change that has waited (to start, or to end) for longer than asked.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Overdue {
    pub(crate) member: String,
    pub(crate) kind: &'static str,
    /// Whether it is at work (else it waits for a slot, or for its member's earlier change).
    pub(crate) running: bool,
    pub(crate) waited: Duration,
}

/// The changes waiting and at work, per member.
pub(crate) struct MemberChanges<J> {
    limit: usize,
    /// Per member, the changes not started yet, in order, with when each arrived and its place in the
    /// order of arrival (the oldest member's change starts first).
    waiting: BTreeMap<String, VecDeque<(Change<J>, Instant, u64)>>,
    arrived: u64,
    running: BTreeMap<String, AtWork>,
    tasks: JoinSet<()>,
    ids: HashMap<Id, String>,
    wake: Arc<Notify>,
}

impl<J: Send + 'static> MemberChanges<J> {
    /// At most `limit` changes at work at once (at least one).
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit: limit.max(1),
            waiting: BTreeMap::new(),
            arrived: 0,
            running: BTreeMap::new(),
            tasks: JoinSet::new(),
            ids: HashMap::new(),
            wake: Arc::default(),
        }
    }

    /// Adds `change` for `member` after the ones it has, replacing those it supersedes; a leave cancels the
    /// member's join at work.
    pub(crate) fn push(&mut self, member: &str, change: Change<J>) {
        let now = (Instant::now(), self.arrived);
        self.arrived += 1;
        let queue = self.waiting.entry(member.to_owned()).or_default();
        match change {
            Change::Join(config) => {
                // Newer credentials: a join or problem not started yet is moot (a leave before it stays).
                while matches!(
                    queue.back(),
                    Some((Change::Join(_) | Change::Unhealthy(_), ..))
                ) {
                    queue.pop_back();
                }
                queue.push_back((Change::Join(config), now.0, now.1));
            }
            Change::Unhealthy(reason) => {
                if let Some((Change::Unhealthy(_), ..)) = queue.back() {
                    queue.pop_back();
                }
                queue.push_back((Change::Unhealthy(reason), now.0, now.1));
            }
            Change::Leave(mut done) => {
                // Whatever waits after its last leave goes; a leave waiting already takes this one's answer.
                while matches!(
                    queue.back(),
                    Some((Change::Join(_) | Change::Unhealthy(_), ..))
                ) {
                    queue.pop_back();
                }
                match queue.back_mut() {
                    Some((Change::Leave(earlier), ..)) => earlier.append(&mut done),
                    _ => {
                        queue.push_back((Change::Leave(done), now.0, now.1));
                        if let Some(running) = self.running.get(member)
                            && running.kind == "join"
                            && queue.len() == 1
                        {
                            // A member still joining: the join is cancelled, the leave comes next.
                            running.abort.abort();
                        }
                    }
                }
            }
        }
    }

    /// Starts the changes that may start now, oldest member first, each with `run`: a member's first
    /// waiting change when it has none at work, while slots are free.
    pub(crate) fn start(
        &mut self,
        mut run: impl FnMut(&str, Change<J>, Slot) -> BoxFuture<'static, ()>,
    ) {
        while self.at_work() < self.limit {
            let next = self
                .waiting
                .iter()
                .filter(|(member, queue)| !queue.is_empty() && !self.running.contains_key(*member))
                .min_by_key(|(_, queue)| queue.front().map(|(_, _, order)| *order))
                .map(|(member, _)| member.clone());
            let Some(member) = next else {
                return;
            };
            let queue = self.waiting.get_mut(&member).expect("found above");
            let (change, ..) = queue.pop_front().expect("not empty");
            if queue.is_empty() {
                self.waiting.remove(&member);
            }
            let kind = change.kind();
            let slot = Slot {
                parked: Arc::default(),
                wake: self.wake.clone(),
            };
            let abort = self.tasks.spawn(run(&member, change, slot.clone()));
            self.ids.insert(abort.id(), member.clone());
            let started = Instant::now();
            let running = AtWork {
                kind,
                started,
                abort,
                slot,
            };
            self.running.insert(member, running);
        }
    }

    /// Waits until a change ends (or parks, freeing a slot: then `None`). Pending while none is at work.
    pub(crate) async fn next(&mut self) -> Option<Ended> {
        if self.tasks.is_empty() {
            return std::future::pending().await;
        }
        let parked = self.wake.notified();
        tokio::select! {
            ended = self.tasks.join_next_with_id() => {
                let (id, cancelled) = match ended.expect("not empty") {
                    Ok((id, ())) => (id, false),
                    Err(error) if error.is_panic() => {
                        tracing::error!(error = %error, "a member change panicked");
                        (error.id(), false)
                    }
                    Err(error) => (error.id(), true),
                };
                let member = self.ids.remove(&id).expect("every task is named");
                self.ids.shrink_when_sparse();
                let running = self.running.remove(&member).expect("every task is at work");
                Some(Ended { member, kind: running.kind, cancelled, took: running.started.elapsed() })
            }
            () = parked => None,
        }
    }

    /// How many changes take a slot now.
    pub(crate) fn at_work(&self) -> usize {
        let parked = self
            .running
            .values()
            .filter(|r| r.slot.parked.load(Ordering::Acquire));
        self.running.len() - parked.count()
    }

    /// How many changes wait to start.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.values().map(VecDeque::len).sum()
    }

    /// Whether a change is at work, parked or not.
    pub(crate) fn busy(&self) -> bool {
        !self.running.is_empty()
    }

    /// Whether `member` has a change waiting or at work.
    pub(crate) fn has(&self, member: &str) -> bool {
        self.running.contains_key(member) || self.waiting.contains_key(member)
    }

    /// The changes that have waited longer than `after`, at work or not yet started.
    pub(crate) fn overdue(&self, after: Duration) -> Vec<Overdue> {
        let now = Instant::now();
        let running = self.running.iter().map(|(member, r)| Overdue {
            member: member.clone(),
            kind: r.kind,
            running: true,
            waited: now.saturating_duration_since(r.started),
        });
        let waiting = self.waiting.iter().flat_map(|(member, queue)| {
            queue.iter().map(move |(change, at, _)| Overdue {
                member: member.clone(),
                kind: change.kind(),
                running: false,
                waited: now.saturating_duration_since(*at),
            })
        });
        running
            .chain(waiting)
            .filter(|o| o.waited > after)
            .collect()
    }
}

#[cfg(test)]
mod tests;
