//! The member runner in paused time, with the test standing in for the controllers (a subscriber of the
//! member set that answers each change when it chooses): a join, a credential change and a leave in
//! order, a join that waits for a leave under way, reload requests at most once per period, a provider
//! that never says it has listed its members, and (in `retries`) joins tried again.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::{COMMANDS_WAITING, LISTED_AT_THE_LATEST, MemberRunner, RELOAD_AGAIN_AFTER};
use crate::client::{ClientPool, PoolConfig, Role};
use crate::members::{Command, LeaveOutcome, LeavePolicy, MemberChange};
use crate::metrics::Metrics;
use crate::readiness::{Phase, Readiness, start_pings};
use crate::runtime::Runtime;
use crate::watch::WatchRegistry;

mod retries;

/// A member runner at work, and the test's ends of its channels.
struct Runner {
    runtime: Arc<Runtime>,
    registry: Registry,
    commands: mpsc::Sender<Command>,
    rejected: mpsc::Sender<String>,
    reload: mpsc::Receiver<String>,
    /// What the controllers are told.
    changes: mpsc::Receiver<MemberChange>,
    task: tokio::task::JoinHandle<()>,
}

fn start() -> Runner {
    let readiness = Arc::new(Readiness::default());
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let runtime = Arc::new(Runtime {
        pool: ClientPool::from_clients([]),
        watches: WatchRegistry::new(readiness.clone(), metrics.clone()),
        readiness: readiness.clone(),
        metrics: metrics.clone(),
        role: watch::channel(Role::sole()).1,
        shards: None,
        members: Default::default(),
    });
    let changes = runtime.members.subscribe();
    // No contexts and no members: the pings stay off, nothing leaves this process.
    let pings = start_pings(
        Vec::new(),
        readiness,
        Duration::from_secs(10),
        metrics,
        false,
    );
    let runner = MemberRunner {
        runtime: runtime.clone(),
        pool: PoolConfig::default(),
        pings: Arc::new(pings),
        policy: LeavePolicy::Delete,
        fixed: vec!["control".into()],
        at_once: 16,
        give_up_after: None,
        allowlist: Default::default(),
    };
    let (commands, received) = mpsc::channel(COMMANDS_WAITING);
    let (rejected, rejections) = mpsc::channel(8);
    let (reloads, reload) = mpsc::channel(8);
    let task = tokio::spawn(runner.run(received, rejections, reloads));
    Runner {
        runtime,
        registry,
        commands,
        rejected,
        reload,
        changes,
        task,
    }
}

impl Runner {
    async fn join(&self, name: &str, server: &str) {
        let config = Box::new(kube::Config::new(server.parse().unwrap()));
        let name = name.to_owned();
        self.commands
            .send(Command::Join { name, config })
            .await
            .unwrap();
    }

    async fn leave(&self, name: &str) -> oneshot::Receiver<LeaveOutcome> {
        let (done, answer) = oneshot::channel();
        let name = name.to_owned();
        self.commands
            .send(Command::Leave { name, done })
            .await
            .unwrap();
        answer
    }

    /// The next change the controllers are told of, within a minute.
    async fn told(&mut self) -> MemberChange {
        let next = tokio::time::timeout(Duration::from_secs(60), self.changes.recv()).await;
        next.expect("a change within a minute")
            .expect("the member set is alive")
    }

    /// A join the controllers are told of: its member, and the answer that ends it.
    async fn joined(&mut self) -> (String, oneshot::Sender<()>) {
        match self.told().await {
            MemberChange::Joined { name, done, .. } => (name, done),
            MemberChange::Left { name, .. } => panic!("{name} left where a join was due"),
        }
    }

    /// A leave the controllers are told of: its member, its policy, and the answer that ends it.
    async fn left(&mut self) -> (String, LeavePolicy, oneshot::Sender<()>) {
        match self.told().await {
            MemberChange::Left {
                name, policy, done, ..
            } => (name, policy, done),
            MemberChange::Joined { name, .. } => panic!("{name} joined where a leave was due"),
        }
    }

    /// Joins `name` and answers its join as the controllers would.
    async fn joined_member(&mut self, name: &str) {
        self.join(name, "https://member.example:6443").await;
        let (_, done) = self.joined().await;
        done.send(()).unwrap();
        settle().await;
    }

    /// `kubeplex_member_changes_total{change,result}` now.
    fn counted(&self, change: &str, result: &str) -> u64 {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).unwrap();
        let series =
            format!(r#"kubeplex_member_changes_total{{change="{change}",result="{result}"}} "#);
        let line = text.lines().find_map(|l| l.strip_prefix(series.as_str()));
        line.map_or(0, |count| count.parse().unwrap())
    }

    fn phase(&self, name: &str) -> Option<Phase> {
        self.runtime.readiness.phase_of(name)
    }

    /// Whether a reload of `name` was asked for since the last look.
    async fn reloaded_after_rejecting(&mut self, name: &str) -> bool {
        self.rejected.send(name.to_owned()).await.unwrap();
        settle().await;
        match self.reload.try_recv() {
            Ok(reloaded) => {
                assert_eq!(reloaded, name);
                true
            }
            Err(_) => false,
        }
    }

    /// Ends the provider's reports; the runner ends once every change has.
    async fn stop(self) {
        drop(self.commands);
        let ended = tokio::time::timeout(Duration::from_secs(60), self.task).await;
        ended.expect("the runner ends within a minute").unwrap();
    }
}

/// Lets the runner take what was sent (paused time does not move while it works).
async fn settle() {
    tokio::time::sleep(Duration::from_millis(10)).await;
}

#[tokio::test(start_paused = true)]
async fn a_join_a_credential_change_and_a_leave_are_carried_out_in_order() {
    let mut runner = start();
    runner.join("member-a", "https://a.example:6443").await;
    let (name, done) = runner.joined().await;
    assert_eq!(name, "member-a");
    // The controllers open its watches: it is a member already, joining, the join not done.
    assert!(runner.runtime.members.is_current("member-a"));
    assert_eq!(runner.phase("member-a"), Some(Phase::Joining));
    assert_eq!(runner.counted("join", "done"), 0);
    done.send(()).unwrap();
    settle().await;
    assert_eq!(runner.counted("join", "done"), 1);
    assert!(runner.runtime.members.joining().is_empty());

    // New credentials: the controllers are told of a join again, and the member never stops being one.
    runner.join("member-a", "https://a-new.example:6443").await;
    let (name, done) = runner.joined().await;
    assert_eq!(name, "member-a");
    assert_eq!(runner.runtime.members.names(), ["member-a"]);
    done.send(()).unwrap();
    settle().await;
    assert_eq!(runner.counted("credentials", "done"), 1);
    assert_eq!(runner.counted("join", "done"), 1);

    let answer = runner.leave("member-a").await;
    let (name, policy, done) = runner.left().await;
    assert_eq!((name.as_str(), policy), ("member-a", LeavePolicy::Delete));
    // While the controllers delete its children: no reconcile targets it, its client stays for them.
    let members = &runner.runtime.members;
    assert!(members.names().is_empty() && members.contains("member-a"));
    assert_eq!(members.leaving(), [("member-a".to_owned(), None)]);
    assert_eq!(runner.phase("member-a"), Some(Phase::Leaving(None)));
    assert_eq!(runner.counted("leave", "done"), 0);
    done.send(()).unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(60), answer).await;
    assert_eq!(
        outcome.expect("the leave is answered"),
        Ok(LeaveOutcome::Done)
    );
    settle().await;
    assert!(!runner.runtime.members.contains("member-a"));
    assert!(runner.runtime.members.leaving().is_empty());
    assert_eq!(runner.phase("member-a"), None);
    assert_eq!(runner.counted("leave", "done"), 1);
    runner.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_join_during_a_leave_waits_until_the_leave_is_done() {
    let mut runner = start();
    runner.joined_member("member-a").await;
    let answer = runner.leave("member-a").await;
    let (_, _, leave_done) = runner.left().await;
    runner
        .join("member-a", "https://a-again.example:6443")
        .await;
    // The controllers are not told of the join while they carry the leave out, however long it takes.
    let early = tokio::time::timeout(Duration::from_secs(600), runner.changes.recv()).await;
    assert!(early.is_err(), "the join was told during the leave");
    assert!(!runner.runtime.members.is_current("member-a"));
    leave_done.send(()).unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(60), answer).await;
    assert_eq!(
        outcome.expect("the leave is answered"),
        Ok(LeaveOutcome::Done)
    );
    let (name, done) = runner.joined().await;
    assert_eq!(name, "member-a");
    done.send(()).unwrap();
    settle().await;
    assert!(runner.runtime.members.is_current("member-a"));
    assert!(runner.runtime.members.leaving().is_empty());
    assert_eq!(
        runner.counted("join", "done"),
        2,
        "a join, not a credential change"
    );
    runner.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_member_whose_credentials_are_rejected_is_reloaded_at_most_once_per_period() {
    let mut runner = start();
    runner.joined_member("member-a").await;
    let first = Instant::now();
    assert!(runner.reloaded_after_rejecting("member-a").await);
    assert!(
        !runner.reloaded_after_rejecting("member-a").await,
        "asked again at once"
    );
    assert!(
        !runner.reloaded_after_rejecting("stranger").await,
        "not a member"
    );
    tokio::time::sleep_until(first + RELOAD_AGAIN_AFTER - Duration::from_millis(500)).await;
    assert!(
        !runner.reloaded_after_rejecting("member-a").await,
        "asked again within the period"
    );
    tokio::time::sleep_until(first + RELOAD_AGAIN_AFTER + Duration::from_millis(500)).await;
    assert!(
        runner.reloaded_after_rejecting("member-a").await,
        "not asked again after the period"
    );

    // A member that left and joined again is new: its first rejection is reloaded at once.
    let answer = runner.leave("member-a").await;
    let (_, _, done) = runner.left().await;
    done.send(()).unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(60), answer).await;
    assert_eq!(
        outcome.expect("the leave is answered"),
        Ok(LeaveOutcome::Done)
    );
    runner.joined_member("member-a").await;
    assert!(runner.reloaded_after_rejecting("member-a").await);
    runner.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_provider_that_never_says_it_has_listed_is_waited_for_only_so_long() {
    let runner = start();
    let started = Instant::now();
    tokio::time::sleep_until(started + LISTED_AT_THE_LATEST - Duration::from_millis(100)).await;
    assert!(!runner.runtime.members.is_settled());
    tokio::time::sleep_until(started + LISTED_AT_THE_LATEST + Duration::from_millis(100)).await;
    assert!(runner.runtime.members.is_settled());
    runner.stop().await;

    let runner = start();
    runner.commands.send(Command::Listed).await.unwrap();
    settle().await;
    assert!(runner.runtime.members.is_settled());
    runner.stop().await;
}
