//! Writers frozen with SIGSTOP in the middle of a burst of writes, at random points of it, held past the
//! lease duration and thawed (what an SRE saw: the thawed leader's writes arrived after the takeover).
//! Judged from the API servers' audit logs: nothing a frozen replica had in hand when it was stopped reaches
//! a server after another replica took its Lease — the leader's, or (sharded) one of its shards' — until it
//! holds one again.
//!
//! `KUBEPLEX_FREEZES` sets the number of freezes per mode (default 4; the full series is 10, docs/ha.md);
//! `KUBEPLEX_FREEZE_SEED` the random points (printed, so a failure can be run again).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ListParams};
use kubeplex::Context as _;
use kubeplex_fleet::Fleet;
use kubeplex_testenv::TestEnv;

use super::audit::{Write, writes_of};
use super::replica::{Replica, until};
use crate::{LEASE, WAIT, apply, holder, one_leader, setup};

/// Parents changed at once before each freeze: two children each, and a status.
const BURST: usize = 30;
const SHARDS: u16 = 12;

/// Freezes per mode without `KUBEPLEX_FREEZES`: enough that most hit a replica while it writes (checked).
const FREEZES: usize = 4;

/// `KUBEPLEX_FREEZES`, or [`FREEZES`]; anything but a positive number is refused, as a run of no freeze
/// would prove nothing.
fn freezes() -> usize {
    let Ok(text) = std::env::var("KUBEPLEX_FREEZES") else {
        return FREEZES;
    };
    match text.parse() {
        Ok(n) if n > 0 => n,
        _ => panic!("KUBEPLEX_FREEZES must be a positive number of freezes, not {text:?}"),
    }
}

/// A small xorshift generator: the freeze points need no more, and the seed is printed.
struct Points(u64);

impl Points {
    fn new() -> Self {
        let seed: u64 = std::env::var("KUBEPLEX_FREEZE_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| Timestamp::now().subsec_nanosecond().unsigned_abs().into());
        eprintln!("KUBEPLEX_FREEZE_SEED={seed}");
        Self(seed | 1)
    }

    /// A number in `1..=most`.
    fn next(&mut self, most: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        1 + usize::try_from(self.0 % most as u64).unwrap()
    }
}

/// One freeze: who, which Leases it held (as the audit log names them), when it was stopped and thawed.
struct Freeze {
    frozen: String,
    leases: Vec<String>,
    stopped: Timestamp,
    /// The point of the burst it was stopped at: this many of the round's children were in cluster-a.
    point: usize,
}

/// Gives the burst's parents `image` in the background; the replicas apply their children meanwhile.
fn burst(control: &Client, ns: &str, image: &str) -> tokio::task::JoinHandle<()> {
    let (control, ns, image) = (control.clone(), ns.to_owned(), image.to_owned());
    tokio::spawn(async move {
        for i in 0..BURST {
            apply(&control, &ns, &format!("burst-{i}"), &image).await;
        }
    })
}

/// Waits until `point` of the round's children in cluster-a run `image` (as fast as the server answers, at
/// most 30 s); how many did.
async fn reached(children: &Api<Deployment>, image: &str, point: usize) -> usize {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let listed = children.list(&ListParams::default()).await;
        let with = listed.map_or(0, |l| {
            l.items
                .iter()
                .filter(|d| {
                    let spec = d.spec.template.spec.as_ref();
                    let first = spec.and_then(|s| s.containers.first());
                    first.and_then(|c| c.image.as_deref()) == Some(image)
                })
                .count()
        });
        if with >= point || tokio::time::Instant::now() >= deadline {
            return with;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The writes of the frozen replica, other than Leases, that the servers received after another replica
/// took one of its Leases and before it held one again; how many of its child writes it had made in the 2 s
/// before the stop (it was busy).
fn judged(
    freeze: &Freeze,
    writes: &BTreeMap<String, Vec<Write>>,
) -> (Vec<String>, usize, Timestamp) {
    let accepted_lease = |w: &&Write| {
        freeze.leases.contains(&w.what) && (200..300).contains(&w.code) && w.at > freeze.stopped
    };
    let taken = writes
        .iter()
        .filter(|(identity, _)| **identity != freeze.frozen)
        .flat_map(|(_, w)| w.iter().filter(accepted_lease))
        .map(|w| w.at)
        .min()
        .expect("another replica took a Lease of the frozen one");
    let own = &writes[&freeze.frozen];
    let back = own.iter().filter(accepted_lease).map(|w| w.at).min();
    let late = own
        .iter()
        .filter(|w| !w.what.starts_with("leases ") && w.at > taken)
        .filter(|w| back.is_none_or(|back| w.at < back))
        .map(Write::line)
        .collect();
    let busy_from = freeze.stopped - Duration::from_secs(2);
    let busy = own
        .iter()
        .filter(|w| w.cluster != Fleet::Control && w.at > busy_from && w.at <= freeze.stopped)
        .count();
    (late, busy, taken)
}

/// Judges every freeze; panics listing the late writes of all of them.
fn judge_all(env: &TestEnv, mode: &str, identities: &[String], done: &[Freeze]) {
    let writes: BTreeMap<String, Vec<Write>> = identities
        .iter()
        .map(|identity| (identity.clone(), writes_of(env, identity)))
        .collect();
    let mut failures = Vec::new();
    let mut busy_freezes = 0;
    for (n, freeze) in done.iter().enumerate() {
        let (late, busy, taken) = judged(freeze, &writes);
        busy_freezes += usize::from(busy > 0);
        eprintln!(
            "{mode} freeze {n}: {} stopped at {} (point {}), {busy} child writes in its last 2 s, taken over at {taken}, {} late writes",
            freeze.frozen,
            freeze.stopped,
            freeze.point,
            late.len()
        );
        if !late.is_empty() {
            failures.push(format!(
                "freeze {n}: {} wrote after its Lease was taken at {taken}:\n{}",
                freeze.frozen,
                late.join("\n")
            ));
        }
    }
    eprintln!(
        "{mode}: {} freezes, {busy_freezes} while writing, {} with late writes",
        done.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        !done.is_empty(),
        "no freeze was made: the test proves nothing"
    );
    assert!(
        busy_freezes * 2 >= done.len(),
        "fewer than half the freezes hit a replica while it wrote children: the test proves little"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn leaders_frozen_mid_burst_send_nothing_after_the_takeover() {
    let count = freezes();
    let (env, ns, control) = setup("ha-freeze").await;
    let replicas: Vec<Replica> = (1..=3)
        .map(|n| Replica::start(env, &ns, &format!("freeze-{n}")))
        .collect();
    let all: Vec<&Replica> = replicas.iter().collect();
    let children =
        Api::<Deployment>::namespaced(env.client(Fleet::ClusterA.name()).await.unwrap(), &ns);
    let mut points = Points::new();
    let mut done = Vec::new();
    for round in 0..count {
        let leader = &replicas[one_leader(&control, &ns, &all).await];
        let image = format!("nginx:1.{round}");
        let applying = burst(&control, &ns, &image);
        let point = points.next(BURST);
        let point = reached(&children, &image, point).await;
        let stopped = Timestamp::now();
        leader.signal("STOP");
        done.push(Freeze {
            frozen: leader.identity.clone(),
            leases: vec![format!("leases {ns}/{LEASE}")],
            stopped,
            point,
        });
        applying.await.unwrap();
        let successor = until(
            "another replica takes over",
            WAIT,
            &all,
            async || match holder(&control, &ns).await {
                Some(h) if h != leader.identity => Ok(h),
                other => Err(format!("held by {other:?}")),
            },
        )
        .await;
        leader.signal("CONT");
        until(
            "the thawed leader stands by",
            WAIT,
            &all,
            async || match leader.role().await {
                Some((role, holder)) if role == "standby" && holder == successor => Ok(()),
                other => Err(format!("{other:?}")),
            },
        )
        .await;
    }
    let identities: Vec<String> = replicas.iter().map(|r| r.identity.clone()).collect();
    judge_all(env, "leader election", &identities, &done);
}

#[tokio::test(flavor = "multi_thread")]
async fn sharded_replicas_frozen_mid_burst_send_nothing_for_shards_taken_over() {
    let count = freezes();
    let (env, ns, control) = setup("ha-shard-freeze").await;
    let replicas: Vec<Replica> = (1..=3)
        .map(|n| Replica::start_sharded(env, &ns, &format!("sfreeze-{n}"), SHARDS))
        .collect();
    let all: Vec<&Replica> = replicas.iter().collect();
    let children =
        Api::<Deployment>::namespaced(env.client(Fleet::ClusterA.name()).await.unwrap(), &ns);
    let mut points = Points::new();
    let mut done = Vec::new();
    for round in 0..count {
        let held = super::sharded::split(&all, SHARDS).await;
        let frozen = &replicas[round % replicas.len()];
        let image = format!("nginx:1.{round}");
        let applying = burst(&control, &ns, &image);
        let point = points.next(BURST);
        let point = reached(&children, &image, point).await;
        let stopped = Timestamp::now();
        frozen.signal("STOP");
        let leases = held[&frozen.identity]
            .iter()
            .map(|shard| format!("leases {ns}/{LEASE}-shard-{shard}"))
            .collect();
        done.push(Freeze {
            frozen: frozen.identity.clone(),
            leases,
            stopped,
            point,
        });
        applying.await.unwrap();
        let others: Vec<&Replica> = all
            .iter()
            .copied()
            .filter(|r| r.identity != frozen.identity)
            .collect();
        super::sharded::split(&others, SHARDS).await;
        frozen.signal("CONT");
    }
    super::sharded::split(&all, SHARDS).await;
    let identities: Vec<String> = replicas.iter().map(|r| r.identity.clone()).collect();
    judge_all(env, "sharded", &identities, &done);
}
