//! The Lease loop of sharded mode against a stand-in Lease server, in paused time: a replica that joins gets
//! its shards handed over (the old owner's fence closed before it releases), a member that stops renewing is
//! judged gone a lease duration after its last change was seen, one that returns gets its shards back, one
//! that leaves gives everything up, and Leases a stranger wrote count for no longer than a lease duration;
//! under generated fault schedules in [`schedules`].
//!
//! Timings: lease duration 15 s, renew deadline 10 s, retry period 1 s. Replica `a` starts at `t0` and runs
//! its rounds at whole seconds, `b` at half seconds; the checks look between two rounds.

mod schedules;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;

use super::{Group, run};
use crate::client::{Fence, Role};
use crate::core::ContextName;
use crate::ha::rendezvous::{ShardBy, owner};
use crate::ha::shard_state::ShardState;
use crate::ha::sharding::Sharding;
use crate::readiness::Readiness;
use crate::testing::fake_leases::{FakeLeases, Link};

const SHARDS: u16 = 8;

/// One replica running sharded mode.
struct Replica {
    link: Link,
    state: Arc<ShardState>,
    member: Fence,
    role: watch::Receiver<Role>,
    readiness: Arc<Readiness>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Replica {
    fn start(leases: &FakeLeases, identity: &str) -> Self {
        let link = leases.link();
        let sharding =
            Sharding::by_parent(ContextName::new("control"), "operators", "fleet", SHARDS)
                .with_identity(identity)
                .lease_duration(Duration::from_secs(15))
                .renew_deadline(Duration::from_secs(10))
                .retry_period(Duration::from_secs(1));
        let (names, shard_leases) = sharding.shards(&[]).into_iter().unzip();
        let state = Arc::new(ShardState::new(ShardBy::Parent(SHARDS), names));
        let member = Fence::closed();
        let (role_sender, role) = watch::channel(Role {
            leader: false,
            holder: None,
        });
        let readiness = Arc::new(Readiness::default());
        let (stop, stopped) = watch::channel(false);
        let group = Group {
            api: link.api(),
            sharding,
            leases: shard_leases,
            state: state.clone(),
            member: member.clone(),
            role: role_sender,
            readiness: readiness.clone(),
        };
        let task = tokio::spawn(run(group, stopped));
        Self {
            link,
            state,
            member,
            role,
            readiness,
            stop,
            task,
        }
    }

    /// The shards whose fence is open now.
    fn held(&self) -> Vec<usize> {
        let shards = 0..usize::from(SHARDS);
        shards.filter(|s| self.state.holds(*s)).collect()
    }

    /// The live members, as this replica's last round found them.
    fn members(&self) -> Vec<String> {
        self.readiness.sharding().unwrap_or_default().members
    }

    /// Records, for each release of a shard's Lease this replica sends, whether that shard's fence was
    /// open when the release arrived.
    fn record_releases(&self) -> Arc<Mutex<Vec<(usize, bool)>>> {
        let releases = Arc::new(Mutex::new(Vec::new()));
        let (state, seen) = (self.state.clone(), releases.clone());
        self.link.observe(move |request| {
            let path = request.uri.split('?').next().unwrap_or_default();
            let Some(shard) = path.split("/leases/fleet-shard-").nth(1) else {
                return;
            };
            let lease: Option<Lease> = serde_json::from_str(&request.body).ok();
            let holder = lease.and_then(|l| l.spec?.holder_identity);
            if request.method == "PUT" && holder.is_none() {
                let shard: usize = shard.parse().expect("a shard's number");
                seen.lock()
                    .push((shard, state.fence(shard).allows_writes()));
            }
        });
        releases
    }

    /// Stops the replica and waits (a minute at most) until it has given everything up.
    async fn stop(self) {
        let _ = self.stop.send(true);
        let ended = tokio::time::timeout(Duration::from_secs(60), self.task).await;
        ended.expect("the replica stops within a minute").unwrap();
    }
}

/// Sleeps until `ms` milliseconds after `t0`.
async fn at(t0: Instant, ms: u64) {
    tokio::time::sleep_until(t0 + Duration::from_millis(ms)).await;
}

/// The shards rendezvous hashing gives `identity` among `members`.
fn owned_by(identity: &str, members: &[&str]) -> Vec<usize> {
    let members: Vec<String> = members.iter().map(|m| (*m).to_owned()).collect();
    let shards = 0..usize::from(SHARDS);
    shards
        .filter(|s| owner(&s.to_string(), &members) == Some(identity))
        .collect()
}

/// The shards both replicas hold at once.
fn both(a: &Replica, b: &Replica) -> Vec<usize> {
    let b_holds = b.held();
    a.held()
        .into_iter()
        .filter(|s| b_holds.contains(s))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_joining_replica_gets_its_shards_after_the_old_owner_closed_their_fences_and_released_them()
 {
    let (a_share, b_share) = (owned_by("a", &["a", "b"]), owned_by("b", &["a", "b"]));
    assert!(
        !a_share.is_empty() && !b_share.is_empty(),
        "a split to hand over"
    );
    let leases = FakeLeases::default();
    let t0 = Instant::now();
    let a = Replica::start(&leases, "a");
    at(t0, 500).await;
    assert_eq!(
        a.held().len(),
        usize::from(SHARDS),
        "alone, a holds every shard"
    );
    assert!(a.role.borrow().leader && a.member.allows_writes());
    let releases = a.record_releases();

    let b = Replica::start(&leases, "b");
    // b's first round (0.5 s): its member Lease; the shards it owns are still a's. a's round at 1 s: closes
    // and releases them. b's round at 1.5 s takes them.
    for step in (600..=3_000).step_by(100) {
        at(t0, step).await;
        assert!(
            both(&a, &b).is_empty(),
            "both hold {:?} at {step} ms",
            both(&a, &b)
        );
        if step == 1_400 {
            assert_eq!(a.held(), a_share);
            assert!(b.held().is_empty(), "b took a shard before a released it");
        }
    }
    assert_eq!((a.held(), b.held()), (a_share.clone(), b_share.clone()));
    assert_eq!(a.members(), ["a", "b"]);
    assert_eq!(b.members(), ["a", "b"]);
    let releases = releases.lock().clone();
    let released: Vec<usize> = releases.iter().map(|(s, _)| *s).collect();
    assert_eq!(
        released, b_share,
        "a released exactly the shards that moved"
    );
    assert!(
        releases.iter().all(|(_, open)| !open),
        "a released a shard whose fence was open: {releases:?}"
    );
    for shard in &b_share {
        assert_eq!(
            leases.holder(&format!("fleet-shard-{shard}")).as_deref(),
            Some("b")
        );
    }

    // b leaves: its fences close before its releases, its member Lease goes, and a takes every shard at
    // its next round, not a lease duration later.
    let b_releases = b.record_releases();
    let (b_state, b_member) = (b.state.clone(), b.member.clone());
    b.stop().await;
    assert!((0..usize::from(SHARDS)).all(|s| !b_state.holds(s)) && !b_member.allows_writes());
    let b_releases = b_releases.lock().clone();
    assert_eq!(b_releases.len(), b_share.len());
    assert!(b_releases.iter().all(|(_, open)| !open), "{b_releases:?}");
    assert!(!leases.names().contains(&"fleet-member-b".to_owned()));
    at(t0, 4_100).await;
    assert_eq!(a.held().len(), usize::from(SHARDS));
    assert_eq!(a.members(), ["a"]);
    a.stop().await;
    assert!(
        leases.names().iter().all(|n| n.contains("shard")),
        "{:?}",
        leases.names()
    );
    let holders: Vec<Option<String>> = (0..SHARDS)
        .map(|s| leases.holder(&format!("fleet-shard-{s}")))
        .collect();
    assert!(holders.iter().all(Option::is_none), "{holders:?}");
}

#[tokio::test(start_paused = true)]
async fn a_member_that_stops_renewing_is_gone_a_lease_duration_later_and_gets_its_shards_back_when_it_returns()
 {
    let b_share = owned_by("b", &["a", "b"]);
    let leases = FakeLeases::default();
    let t0 = Instant::now();
    let a = Replica::start(&leases, "a");
    at(t0, 500).await;
    let b = Replica::start(&leases, "b");
    at(t0, 10_700).await;
    assert_eq!(b.held(), b_share);
    // b's last round that gets through is at 10.5 s; a sees its Leases change at 11 s. b's fences hold
    // until 20.5 s, a counts b as a member until 26 s and then takes its shards.
    b.link.silent(true);
    let mut overlaps = Vec::new();
    for step in (10_800..=30_000).step_by(100) {
        at(t0, step).await;
        if !both(&a, &b).is_empty() {
            overlaps.push(step);
        }
        match step {
            20_400 => assert_eq!(b.held(), b_share, "b's fences closed before the deadline"),
            20_600 => assert!(b.held().is_empty() && !b.member.allows_writes()),
            // b's hanging round gives up at 21.5 s: its controllers stop.
            21_400 => assert!(b.role.borrow().leader),
            21_600 => assert!(!b.role.borrow().leader),
            25_900 => {
                assert_eq!(a.members(), ["a", "b"], "b judged gone early");
                assert!(a.held().iter().all(|s| !b_share.contains(s)));
            }
            26_100 => {
                assert_eq!(a.members(), ["a"], "b not judged gone at 26 s");
                assert_eq!(a.held().len(), usize::from(SHARDS));
            }
            _ => {}
        }
    }
    // b returns at 30.5 s: its waiting round renews its member Lease, a counts it again at 31 s and
    // releases b's shards, and b takes them at its next round (31.5 s).
    at(t0, 30_500).await;
    b.link.silent(false);
    for step in (30_600..=33_000).step_by(100) {
        at(t0, step).await;
        if !both(&a, &b).is_empty() {
            overlaps.push(step);
        }
    }
    assert!(overlaps.is_empty(), "both held a shard at {overlaps:?} ms");
    assert_eq!(a.members(), ["a", "b"]);
    assert_eq!(b.members(), ["a", "b"]);
    assert_eq!(b.held(), b_share);
    assert_eq!(a.held(), owned_by("a", &["a", "b"]));
    assert!(b.role.borrow().leader);
    a.stop().await;
    b.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_stranger_s_member_leases_hand_out_no_shards_for_longer_than_a_lease_duration() {
    let leases = FakeLeases::default();
    let sharding = Sharding::by_parent(ContextName::new("control"), "operators", "fleet", SHARDS);
    let member = |name: &str, holder: &str| Lease {
        metadata: super::labelled(name, "operators", "fleet", "member"),
        spec: Some(k8s_openapi::api::coordination::v1::LeaseSpec {
            holder_identity: Some(holder.to_owned()),
            lease_duration_seconds: Some(i32::MAX),
            ..Default::default()
        }),
    };
    // A Lease named for no replica of its holder: never a member. One named right, but with a duration
    // that would hold for good: a member only until it has not changed for a's own lease duration.
    leases.write(member("fleet-member-anyone", "phantom"));
    leases.write(member(&sharding.member_lease("ghost"), "ghost"));
    let t0 = Instant::now();
    let a = Replica::start(&leases, "a");
    at(t0, 1_500).await;
    assert_eq!(a.members(), ["a", "ghost"]);
    at(t0, 14_500).await;
    assert_eq!(a.members(), ["a", "ghost"]);
    assert_eq!(a.held(), owned_by("a", &["a", "ghost"]));
    at(t0, 15_500).await;
    assert_eq!(
        a.members(),
        ["a"],
        "ghost still a member after 15 s unchanged"
    );
    at(t0, 16_500).await;
    assert_eq!(a.held().len(), usize::from(SHARDS));
    a.stop().await;
}
