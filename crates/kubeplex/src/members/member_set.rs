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
use crate::client::LastAnswer;

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
    /// When each member's server last answered one of its clients.
    answers: RwLock<BTreeMap<String, LastAnswer>>,
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

    /// When the server of member `name` last answered one of its clients, if it is a member that has.
    pub(crate) fn last_answer(&self, name: &str) -> Option<tokio::time::Instant> {
        self.answers.read().get(name).and_then(LastAnswer::at)
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

    /// The answers of member `name`'s server to its clients are stamped on `answers` (before it joins).
    pub(crate) fn answers_on(&self, name: &str, answers: LastAnswer) {
        self.answers.write().insert(name.to_owned(), answers);
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
            tracing::warn!(cluster = %name, "member leaving while a child sync there has not ended: it may leave a child behind");
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
        self.answers.write().remove(name);
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
mod tests {
    //! The member set in paused time, with the test standing in for the controllers: a join returns once every
    //! controller has opened its watches, new credentials replace the client, and a leave closes the gate,
    //! waits for the child syncs under way (at most its limit), keeps the client until every controller has
    //! carried the policy out, and says whether children were abandoned.

    use std::sync::Arc;
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::Api;
    use tokio::sync::mpsc;
    use tokio::time::Instant;

    use super::{MemberChange, MemberSet, SYNCS_DRAIN};
    use crate::members::{LeaveOutcome, LeavePolicy, LeaveProgress, Slot};
    use crate::readiness::Readiness;
    use crate::testing::fake_api;

    /// A client of its own stand-in server, and the requests that server saw.
    fn client() -> (kube::Client, fake_api::Requests) {
        fake_api::client(|_, _, _| fake_api::status(404, "NotFound", "nothing here"))
    }

    /// `future`'s output, which must come within a minute.
    async fn within<T>(future: impl Future<Output = T>) -> T {
        let output = tokio::time::timeout(Duration::from_secs(60), future).await;
        output.expect("done within a minute")
    }

    /// The next change `changes` is told of, within `within`; `None` when there is none by then.
    async fn told(
        changes: &mut mpsc::Receiver<MemberChange>,
        within: Duration,
    ) -> Option<MemberChange> {
        let next = tokio::time::timeout(within, changes.recv()).await;
        next.ok()
            .map(|change| change.expect("the member set is alive"))
    }

    /// Answers the next change `changes` is told of (within a minute): its kind and member.
    async fn answer(changes: &mut mpsc::Receiver<MemberChange>) -> (&'static str, String) {
        match told(changes, Duration::from_secs(60)).await {
            Some(MemberChange::Joined { name, done, .. }) => {
                done.send(()).unwrap();
                ("joined", name)
            }
            Some(MemberChange::Left { name, done, .. }) => {
                done.send(()).unwrap();
                ("left", name)
            }
            None => panic!("no change within a minute"),
        }
    }

    /// `name`'s leave under `policy`, on a task of its own.
    fn leaving(
        set: &Arc<MemberSet>,
        name: &'static str,
        policy: LeavePolicy,
    ) -> (Arc<LeaveProgress>, tokio::task::JoinHandle<LeaveOutcome>) {
        let readiness = Arc::new(Readiness::default());
        let progress = Arc::new(LeaveProgress::new(name, Slot::default(), None, readiness));
        let (set, carried) = (set.clone(), progress.clone());
        let leave = tokio::spawn(async move { set.leave(name, policy, carried).await });
        (progress, leave)
    }

    #[tokio::test(start_paused = true)]
    async fn a_join_returns_once_every_controller_has_opened_its_watches() {
        let set = Arc::new(MemberSet::default());
        let (mut first, mut second) = (set.subscribe(), set.subscribe());
        // A controller that stopped: it holds no join back.
        drop(set.subscribe());
        let join = {
            let set = set.clone();
            tokio::spawn(async move { set.joined("member-a", client().0).await })
        };
        assert_eq!(answer(&mut first).await, ("joined", "member-a".to_owned()));
        let Some(MemberChange::Joined { done, .. }) =
            told(&mut second, Duration::from_secs(60)).await
        else {
            panic!("the second controller is told of the join");
        };
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(
            !join.is_finished(),
            "the join returned before a controller had answered"
        );
        assert!(
            set.is_current("member-a"),
            "its client is there for the watches to open"
        );
        done.send(()).unwrap();
        within(join).await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn new_credentials_replace_the_client_and_a_member_that_joins_again_is_not_orphaned_any_more()
     {
        let set = Arc::new(MemberSet::default());
        let (old, old_requests) = client();
        let (new, new_requests) = client();
        within(set.joined("member-a", old)).await;
        within(set.joined("member-a", new)).await;
        let api: Api<ConfigMap> = Api::namespaced(set.client("member-a").unwrap(), "apps");
        let _ = within(api.get_opt("web")).await;
        assert!(
            old_requests.all().is_empty(),
            "the old credentials were used"
        );
        assert_eq!(new_requests.all().len(), 1);

        let (_, leave) = leaving(&set, "member-a", LeavePolicy::Orphan);
        assert_eq!(within(leave).await.unwrap(), LeaveOutcome::Done);
        assert_eq!(set.orphaned(), ["member-a"]);
        assert!(!set.contains("member-a"));
        within(set.joined("member-a", client().0)).await;
        assert!(set.orphaned().is_empty());
        assert!(set.is_current("member-a"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_leave_waits_for_the_syncs_under_way_then_keeps_the_client_until_every_controller_is_done()
     {
        let set = Arc::new(MemberSet::default());
        within(set.joined("member-a", client().0)).await;
        within(set.joined("member-b", client().0)).await;
        let mut controller = set.subscribe();
        let mut syncs = set.enter_all();
        assert_eq!(syncs.len(), 2);
        let (_, in_a) = syncs.remove(0);
        let started = Instant::now();
        let (progress, leave) = leaving(&set, "member-a", LeavePolicy::Delete);
        let forgotten = progress.forgotten();
        drop(progress);
        // The gate is closed at once: no new sync enters, no reconcile targets it; the controllers are not
        // told before the sync under way has ended.
        assert!(
            told(&mut controller, Duration::from_secs(5))
                .await
                .is_none()
        );
        assert!(!set.is_current("member-a"));
        assert_eq!(set.names(), ["member-b"]);
        let entered: Vec<String> = set.enter_all().into_iter().map(|(n, _)| n).collect();
        assert_eq!(entered, ["member-b"]);
        drop(in_a);
        let Some(MemberChange::Left {
            name, policy, done, ..
        }) = told(&mut controller, Duration::from_secs(60)).await
        else {
            panic!("the controllers are told of the leave");
        };
        assert_eq!((name.as_str(), policy), ("member-a", LeavePolicy::Delete));
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        assert!(
            set.client("member-a").is_some(),
            "the deletes need its client"
        );
        assert_eq!(set.leaving().len(), 1);
        done.send(()).unwrap();
        assert_eq!(within(leave).await.unwrap(), LeaveOutcome::Done);
        assert!(set.client("member-a").is_none());
        // Forgotten once it no longer counts as leaving: the controllers reconcile their parents then.
        assert!(set.leaving().is_empty());
        within(forgotten).await;
        // Its gate is open again for a later join (this controller stopped: it is not waited for).
        drop(controller);
        within(set.joined("member-a", client().0)).await;
        assert_eq!(set.enter_all().len(), 2);
        drop(syncs);
    }

    #[tokio::test(start_paused = true)]
    async fn a_sync_that_does_not_end_holds_a_leave_back_only_until_the_drain_limit() {
        let set = Arc::new(MemberSet::default());
        within(set.joined("member-a", client().0)).await;
        let mut controller = set.subscribe();
        let _stuck = set.enter_all();
        let started = Instant::now();
        let (progress, leave) = leaving(&set, "member-a", LeavePolicy::Delete);
        let told_at_limit = told(&mut controller, SYNCS_DRAIN - Duration::from_millis(100)).await;
        assert!(
            told_at_limit.is_none(),
            "the leave did not wait for the sync"
        );
        let Some(MemberChange::Left { done, .. }) =
            told(&mut controller, Duration::from_secs(1)).await
        else {
            panic!("the leave goes on at the drain limit");
        };
        assert_eq!(started.elapsed(), SYNCS_DRAIN);
        // A controller that gave up on the member's children: the leave says so.
        progress.abandon("test-controller", "the member did not answer".into());
        done.send(()).unwrap();
        assert_eq!(
            within(leave).await.unwrap(),
            LeaveOutcome::Abandoned("the member did not answer".into())
        );
    }
}
