//! The election loop ([`run`]) against a stand-in Lease server, in paused time: when a standby takes over,
//! what a Lease's odd durations and holders mean, the race another replica wins, the release on shutdown,
//! and the fence that closes at the renew deadline while a renewal hangs.
//!
//! Timings: lease duration 15 s, renew deadline 10 s, retry period 1 s. A replica started at `t0 + s`
//! runs its rounds at `t0 + s + n` seconds (the stand-in answers at once unless told otherwise), so the
//! checks look at the half-seconds between two rounds.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::ObjectMeta;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;

use super::super::{LeaderElection, run};
use crate::client::{Fence, Role};
use crate::core::ContextName;
use crate::testing::fake_leases::{FakeLeases, Link, line};

/// One replica running the election.
pub(super) struct Replica {
    pub(super) link: Link,
    pub(super) fence: Fence,
    role: watch::Receiver<Role>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Replica {
    pub(super) fn start(leases: &FakeLeases, identity: &str) -> Self {
        let link = leases.link();
        let fence = Fence::closed();
        let (role_sender, role) = watch::channel(Role {
            leader: false,
            holder: None,
        });
        let (stop, stopped) = watch::channel(false);
        let election = LeaderElection::new(ContextName::new("control"), "operators", "apps")
            .with_identity(identity)
            .lease_duration(Duration::from_secs(15))
            .renew_deadline(Duration::from_secs(10))
            .retry_period(Duration::from_secs(1));
        let task = tokio::spawn(run(
            link.api(),
            election,
            fence.clone(),
            role_sender,
            stopped,
        ));
        Self {
            link,
            fence,
            role,
            stop,
            task,
        }
    }

    pub(super) fn leads(&self) -> bool {
        self.role.borrow().leader
    }

    fn holder(&self) -> Option<String> {
        self.role.borrow().holder.clone()
    }

    /// Stops the replica and waits (a minute at most) until it has given everything up.
    pub(super) async fn stop(self) {
        let _ = self.stop.send(true);
        let ended = tokio::time::timeout(Duration::from_secs(60), self.task).await;
        ended.expect("the replica stops within a minute").unwrap();
    }
}

/// Sleeps until `ms` milliseconds after `t0`.
async fn at(t0: Instant, ms: u64) {
    tokio::time::sleep_until(t0 + Duration::from_millis(ms)).await;
}

/// The Lease `apps` held by `holder` (`None`: no holderIdentity), with `duration` in seconds.
fn lease(holder: Option<&str>, duration: Option<i32>) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some("apps".into()),
            namespace: Some("operators".into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: holder.map(str::to_owned),
            renew_time: Some(MicroTime(Timestamp::from_second(100).unwrap())),
            lease_duration_seconds: duration,
            lease_transitions: Some(4),
            ..LeaseSpec::default()
        }),
    }
}

fn transitions(leases: &FakeLeases) -> Option<i32> {
    leases.get("apps")?.spec?.lease_transitions
}

#[tokio::test(start_paused = true)]
async fn a_standby_takes_over_a_lease_duration_after_it_last_saw_the_lease_change_not_before() {
    let leases = FakeLeases::default();
    leases.write(lease(Some("a"), Some(15)));
    let t0 = Instant::now();
    let b = Replica::start(&leases, "b");
    // `a` (not running here) renews once more at 3.5 s; b sees that at its round at 4 s. Its timestamps
    // are another host's and count for nothing: only when b saw the record change.
    at(t0, 3_500).await;
    leases.edit("apps", |spec| {
        spec.renew_time = Some(MicroTime(Timestamp::from_second(103).unwrap()));
    });
    at(t0, 18_900).await;
    assert!(!b.leads() && !b.fence.allows_writes(), "taken over early");
    assert_eq!(b.holder().as_deref(), Some("a"));
    assert_eq!(leases.holder("apps").as_deref(), Some("a"));
    at(t0, 19_100).await;
    assert!(
        b.leads() && b.fence.allows_writes(),
        "not taken over at 19 s"
    );
    assert_eq!(b.holder().as_deref(), Some("b"));
    assert_eq!(leases.holder("apps").as_deref(), Some("b"));
    assert_eq!(transitions(&leases), Some(5), "a take-over is a transition");
    b.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_lease_holds_for_its_shorter_duration_or_the_standbys_own_never_longer() {
    // (the Lease's leaseDurationSeconds, when b takes over): none, an invalid one, or a longer one than b's
    // (a stranger's `2147483647` would hold for good) count as b's own.
    let cases = [
        (Some(0), 15),
        (Some(-5), 15),
        (None, 15),
        (Some(30), 15),
        (Some(i32::MAX), 15),
        (Some(5), 5),
    ];
    for (duration, taken_at) in cases {
        let leases = FakeLeases::default();
        leases.write(lease(Some("a"), duration));
        let t0 = Instant::now();
        let b = Replica::start(&leases, "b");
        at(t0, taken_at * 1000 - 500).await;
        assert!(!b.leads(), "{duration:?}: taken over before {taken_at} s");
        assert_eq!(leases.holder("apps").as_deref(), Some("a"), "{duration:?}");
        at(t0, taken_at * 1000 + 500).await;
        assert!(b.leads(), "{duration:?}: not taken over at {taken_at} s");
        assert_eq!(leases.holder("apps").as_deref(), Some("b"), "{duration:?}");
        b.stop().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_lease_with_an_empty_holder_is_free_at_once() {
    let leases = FakeLeases::default();
    leases.write(lease(Some(""), Some(15)));
    let t0 = Instant::now();
    let b = Replica::start(&leases, "b");
    at(t0, 500).await;
    assert!(b.leads() && b.fence.allows_writes());
    assert_eq!(leases.holder("apps").as_deref(), Some("b"));
    assert_eq!(transitions(&leases), Some(5));
    b.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_replica_whose_write_another_replica_beat_stays_a_standby() {
    // On create: between b's read (no Lease) and its create, `a` creates it.
    let leases = FakeLeases::default();
    leases.before_next_write(|leases| leases.write(lease(Some("a"), Some(15))));
    let t0 = Instant::now();
    let b = Replica::start(&leases, "b");
    at(t0, 500).await;
    assert_eq!(b.link.arrived(), ["GET apps", "POST"]);
    assert!(!b.leads() && !b.fence.allows_writes());
    assert_eq!(b.holder().as_deref(), Some("another replica"));
    assert_eq!(leases.holder("apps").as_deref(), Some("a"));
    b.stop().await;

    // On replace: b read the Lease released, `a` took it before b's write landed; b's write, made over
    // the resourceVersion it read, is refused, and b waits a whole lease duration from the new record on.
    let leases = FakeLeases::default();
    leases.write(lease(None, Some(15)));
    leases
        .before_next_write(|leases| leases.edit("apps", |s| s.holder_identity = Some("a".into())));
    let t0 = Instant::now();
    let b = Replica::start(&leases, "b");
    at(t0, 500).await;
    assert_eq!(b.link.arrived(), ["GET apps", "PUT apps"]);
    assert!(!b.leads() && !b.fence.allows_writes());
    assert_eq!(
        leases.holder("apps").as_deref(),
        Some("a"),
        "a's write stands"
    );
    at(t0, 1_500).await;
    assert_eq!(b.holder().as_deref(), Some("a"));
    at(t0, 15_500).await;
    assert!(
        !b.leads(),
        "taken over before a lease duration since the record changed"
    );
    at(t0, 16_500).await;
    assert!(b.leads());
    b.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_leader_closes_its_fence_then_releases_and_a_standby_takes_over_at_its_next_round() {
    let leases = FakeLeases::default();
    let t0 = Instant::now();
    let a = Replica::start(&leases, "a");
    // What a's fence said when each of a's requests arrived.
    let fence_at_arrival = Arc::new(Mutex::new(Vec::new()));
    let (fence, seen) = (a.fence.clone(), fence_at_arrival.clone());
    a.link
        .observe(move |request| seen.lock().push((line(request), fence.allows_writes())));
    at(t0, 200).await;
    let (b, c) = (Replica::start(&leases, "b"), Replica::start(&leases, "c"));
    at(t0, 5_300).await;
    assert!(a.leads() && !b.leads() && !c.leads());
    // A standby that stops has nothing to give up: it writes nothing.
    let c_link = c.link.clone();
    c.stop().await;
    let writes: Vec<String> = c_link
        .arrived()
        .into_iter()
        .filter(|r| !r.starts_with("GET"))
        .collect();
    assert!(writes.is_empty(), "{writes:?}");
    assert_eq!(leases.holder("apps").as_deref(), Some("a"));

    fence_at_arrival.lock().clear();
    let fence = a.fence.clone();
    a.stop().await;
    assert!(!fence.allows_writes());
    assert_eq!(
        *fence_at_arrival.lock(),
        [
            ("GET apps".to_owned(), false),
            ("PUT apps".to_owned(), false)
        ],
        "the release was sent while the fence was still open"
    );
    let released = leases.get("apps").unwrap().spec.unwrap();
    assert_eq!(released.holder_identity, None);
    assert_eq!(released.lease_duration_seconds, Some(1));
    // b's next round (at 6.2 s) takes it: not a lease duration later.
    assert!(!b.leads());
    at(t0, 6_300).await;
    assert!(b.leads() && b.fence.allows_writes());
    assert_eq!(leases.holder("apps").as_deref(), Some("b"));
    b.stop().await;
}

#[tokio::test(start_paused = true)]
async fn while_a_renewal_hangs_the_fence_closes_at_the_renew_deadline_before_anyone_can_take_over()
{
    let leases = FakeLeases::default();
    let t0 = Instant::now();
    let a = Replica::start(&leases, "a");
    at(t0, 500).await;
    let b = Replica::start(&leases, "b");
    assert!(a.leads());
    // From 4.5 s a's link is slow: the round sent at 5 s reads at 7 s and renews at 9 s — its last; from
    // 9.5 s nothing of a's arrives. Its fence holds until the renewal's *send* plus the renew deadline:
    // 15 s. b saw the renewal at its round at 9.5 s and may take over at 24.5 s.
    at(t0, 4_500).await;
    a.link.delay(Duration::from_secs(2));
    at(t0, 9_500).await;
    a.link.silent(true);
    let mut overlaps = Vec::new();
    let mut step = 9_500;
    while step < 30_000 {
        step += 100;
        at(t0, step).await;
        let b_holds = leases.holder("apps").as_deref() == Some("b");
        if a.fence.allows_writes() && (b_holds || b.fence.allows_writes()) {
            overlaps.push(step);
        }
        match step {
            14_900 => assert!(a.fence.allows_writes(), "closed before the renew deadline"),
            15_100 => assert!(!a.fence.allows_writes(), "open after the renew deadline"),
            // The hanging round gives up after a renew deadline (at 20 s): the controllers stop then.
            19_900 => assert!(a.leads()),
            20_100 => assert!(!a.leads() && !b.leads()),
            24_400 => assert!(!b.leads() && !b_holds, "taken over early"),
            24_600 => assert!(b.leads() && b_holds),
            _ => {}
        }
    }
    assert!(overlaps.is_empty(), "both could write at {overlaps:?} ms");
    // a's link answers again: a finds b holding the Lease and stays a standby.
    a.link.delay(Duration::ZERO);
    a.link.silent(false);
    at(t0, 32_000).await;
    assert!(!a.leads() && !a.fence.allows_writes());
    assert_eq!(a.holder().as_deref(), Some("b"));
    assert_eq!(leases.holder("apps").as_deref(), Some("b"));
    a.stop().await;
    b.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_leader_whose_server_fails_leads_until_its_renew_deadline_then_renews_when_it_answers() {
    let leases = FakeLeases::default();
    let t0 = Instant::now();
    let a = Replica::start(&leases, "a");
    // The round at 5 s is the last that succeeds: the fence holds until 15 s, and the rounds that fail
    // meanwhile keep a leading only while it does.
    at(t0, 5_500).await;
    a.link.failing(Some(500));
    at(t0, 14_500).await;
    assert!(a.leads() && a.fence.allows_writes());
    at(t0, 15_500).await;
    assert!(!a.leads() && !a.fence.allows_writes());
    assert_eq!(a.holder().as_deref(), Some("a"), "the holder as last known");
    a.link.failing(None);
    at(t0, 16_500).await;
    assert!(
        a.leads() && a.fence.allows_writes(),
        "its own Lease is renewed"
    );
    a.stop().await;
}
