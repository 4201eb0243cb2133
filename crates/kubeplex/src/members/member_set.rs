//! The fleet's current members, as the runtime shares them: each joined member's client, the members that
//! left with their children orphaned, and the controllers to tell when a member joins or leaves.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kube::Client;
use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, oneshot};

use super::changes::LeaveOutcome;
use super::gate::{MemberGate, SyncGuard};
use super::leaving::LeaveProgress;
use super::provider::LeavePolicy;

/// How long a leave waits for the child syncs under way in the member: above a sync's own cap.
const SYNCS_DRAIN: std::time::Duration = std::time::Duration::from_secs(20);

/// How many changes a controller may have waiting; the member runner waits beyond that.
const CHANGES_WAITING: usize = 16;

/// A change a controller with children in every member acts on.
pub(crate) enum MemberChange {
    /// The member joined, or its credentials changed (its earlier watches are closed already): open its
    /// watches with `client`, answer `done`, then reconcile every parent for it.
    Joined {
        name: String,
        client: Client,
        done: oneshot::Sender<()>,
    },
    /// The member leaves: carry out `policy` for its children (telling `progress` what a member that does
    /// not answer makes it wait for), then answer `done`.
    Left {
        name: String,
        policy: LeavePolicy,
        progress: Arc<LeaveProgress>,
        done: oneshot::Sender<()>,
    },
}

/// The members of a manager's fleet (none unless it has a member provider).
#[derive(Default)]
pub(crate) struct MemberSet {
    clients: RwLock<BTreeMap<String, Client>>,
    /// Members leaving (no reconcile targets them any more, but their clients stay for the cleanup), and
    /// the child syncs under way in each.
    gate: Arc<MemberGate>,
    /// Members that left under [`LeavePolicy::Orphan`]: the parents' status says their children stay.
    orphaned: Mutex<BTreeSet<String>>,
    subscribers: Mutex<Vec<mpsc::Sender<MemberChange>>>,
    /// Members whose join the manager has been told of and not carried out yet: they may hold children.
    expected: Mutex<BTreeSet<String>>,
    /// The leaves under way.
    leaves: Mutex<BTreeMap<String, Arc<LeaveProgress>>>,
    /// The provider has reported the members it had when it started (or the manager stopped waiting).
    settled: std::sync::atomic::AtomicBool,
}

impl MemberSet {
    /// A child sync begins in every member that is not leaving: the names, each with the guard that ends
    /// its sync when dropped.
    pub(crate) fn enter_all(&self) -> Vec<(String, SyncGuard)> {
        let names = self.clients.read().keys().cloned().collect();
        self.gate.enter(names)
    }

    /// The client of member `name`, if it is one.
    pub(crate) fn client(&self, name: &str) -> Option<Client> {
        self.clients.read().get(name).cloned()
    }

    /// The names of the joined members that are not leaving, in order: where reconciles put children.
    pub(crate) fn names(&self) -> Vec<String> {
        let leaving = self.gate.leaving();
        let clients = self.clients.read();
        let names = clients.keys().filter(|name| !leaving.contains(*name));
        names.cloned().collect()
    }

    /// Whether `name` is a joined member that is not leaving: one reconciles may put children in.
    pub(crate) fn is_current(&self, name: &str) -> bool {
        !self.gate.is_leaving(name) && self.clients.read().contains_key(name)
    }

    /// Whether `name` is a joined member.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.clients.read().contains_key(name)
    }

    /// The members that left with their children orphaned (and have not joined again).
    pub(crate) fn orphaned(&self) -> Vec<String> {
        let orphaned = self.orphaned.lock();
        orphaned.iter().cloned().collect()
    }

    /// A join of `name` is on its way (`true`), or no longer (`false`: done, or superseded).
    pub(crate) fn expect(&self, name: &str, on: bool) {
        let mut expected = self.expected.lock();
        match on {
            true => expected.insert(name.to_owned()),
            false => expected.remove(name),
        };
    }

    /// The members about to join: told of, not joined yet.
    pub(crate) fn joining(&self) -> Vec<String> {
        let expected = self.expected.lock();
        let clients = self.clients.read();
        let joining = expected.iter().filter(|name| !clients.contains_key(*name));
        joining.cloned().collect()
    }

    /// The provider has reported its members (every member there is is joined, or about to).
    pub(crate) fn settle(&self) {
        self.settled
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether every member there is is known: joined, or about to.
    pub(crate) fn is_settled(&self) -> bool {
        self.settled.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The members leaving now, each with what its leave waits for (if it waits).
    pub(crate) fn leaving(&self) -> Vec<(String, Option<String>)> {
        let leaves = self.leaves.lock();
        let leaving = leaves.iter();
        leaving
            .map(|(name, p)| (name.clone(), p.waiting_for()))
            .collect()
    }

    /// A controller's stream of changes, from now on.
    pub(crate) fn subscribe(&self) -> mpsc::Receiver<MemberChange> {
        let (changes, received) = mpsc::channel(CHANGES_WAITING);
        let mut subscribers = self.subscribers.lock();
        subscribers.push(changes);
        received
    }

    /// `name` joined (or its credentials changed) with `client`; returns once every controller has opened
    /// its watches there, so that a later change never races an earlier one's watches.
    pub(crate) async fn joined(&self, name: &str, client: Client) {
        self.clients.write().insert(name.to_owned(), client.clone());
        self.orphaned.lock().remove(name);
        let mut answers = Vec::new();
        for subscriber in self.subscribers() {
            let (done, answer) = oneshot::channel();
            let (name, client) = (name.to_owned(), client.clone());
            if subscriber
                .send(MemberChange::Joined { name, client, done })
                .await
                .is_ok()
            {
                answers.push(answer);
            }
        }
        futures::future::join_all(answers).await;
    }

    /// `name` leaves: every controller carries out `policy` (its client is kept until they have, so that
    /// they can delete), then the member is forgotten. A member that does not answer makes it wait, as
    /// `progress` says, until it answers or the controllers give up on its children.
    pub(crate) async fn leave(
        &self,
        name: &str,
        policy: LeavePolicy,
        progress: Arc<LeaveProgress>,
    ) -> LeaveOutcome {
        (self.leaves.lock()).insert(name.to_owned(), progress.clone());
        // From now on reconciles leave it out (and, under the orphan policy, say so in the status).
        if !self.gate.close(name, SYNCS_DRAIN).await {
            tracing::warn!(context = %name, "member leaving while a child sync there has not ended: it may leave a child behind");
        }
        if policy == LeavePolicy::Orphan {
            let mut orphaned = self.orphaned.lock();
            orphaned.insert(name.to_owned());
        }
        let mut answers = Vec::new();
        for subscriber in self.subscribers() {
            let (done, answer) = oneshot::channel();
            let (name, progress) = (name.to_owned(), progress.clone());
            let change = MemberChange::Left {
                name,
                policy,
                progress,
                done,
            };
            if subscriber.send(change).await.is_ok() {
                answers.push(answer);
            }
        }
        // A controller that stopped meanwhile drops its `done`: that counts as an answer.
        futures::future::join_all(answers).await;
        self.clients.write().remove(name);
        self.gate.open(name);
        (self.leaves.lock()).remove(name);
        progress.forget();
        match progress.abandoned() {
            Some(reason) => LeaveOutcome::Abandoned(reason),
            None => LeaveOutcome::Done,
        }
    }

    fn subscribers(&self) -> Vec<mpsc::Sender<MemberChange>> {
        let mut subscribers = self.subscribers.lock();
        subscribers.retain(|s| !s.is_closed());
        subscribers.clone()
    }
}

#[cfg(test)]
mod tests;
