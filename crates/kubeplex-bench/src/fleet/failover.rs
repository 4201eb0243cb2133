//! Section `failover`: how long the work stops when the leader dies. Three replicas of the fleet section's
//! kubeplex operator (written as `examples/fleet` is) run with leader election on one Lease, each in its own
//! process; the parent SIGKILLs the leader again and again (a lost node, an OOM kill: nothing is released),
//! creates a new parent at once, and times (a) until another replica holds the Lease and (b) until the new
//! parent's child exists in the child cluster, written by the new leader. A replacement replica joins after
//! each kill, so every kill finds a leader and two warm standbys.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use serde::Serialize;

use super::app::{FleetApp, FleetAppSpec, PARENT_NAMESPACE};
use super::child::{ElectionSpec, FleetSpec, Synced};
use super::process::Operator;
use super::setup::{Host, control_and_child, one_child_spec};
use crate::figures::{Figure, Goal, Section, percentile};
use crate::harness::{jitter, progress};

const CONTROL: &str = "cluster-0";
const CHILD: &str = "cluster-1";
/// The Lease's namespace in the control cluster, and the children's in the child cluster (the parents are
/// in the fleet operator's [`PARENT_NAMESPACE`]; the section deletes them when it is done).
const NAMESPACE: &str = "failover";
const LEASE: &str = "fleet-failover";
const REPLICAS: usize = 3;
/// Goal: a killed leader's successor reconciles a new parent within this many seconds.
const GOAL_S: f64 = 20.0;
/// How long one takeover may take before the section fails.
const ROUND: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(50);

#[derive(Clone, Debug, Serialize)]
pub(crate) struct FailoverOptions {
    /// How many times the leader is killed.
    pub kills: usize,
    /// The replicas' leader election timings, in seconds.
    pub lease_duration_s: u64,
    pub renew_deadline_s: u64,
    pub retry_period_s: u64,
}

impl FailoverOptions {
    /// client-go's timings, kubeplex's defaults: what a deployment runs.
    pub fn full() -> Self {
        Self {
            kills: 10,
            lease_duration_s: 15,
            renew_deadline_s: 10,
            retry_period_s: 2,
        }
    }

    pub fn quick() -> Self {
        Self {
            kills: 3,
            ..Self::full()
        }
    }

    /// One kill, with the shortest whole-second timings (still retry < renew deadline < lease): the
    /// takeover waits out the lease.
    pub fn smoke() -> Self {
        Self {
            kills: 1,
            lease_duration_s: 3,
            renew_deadline_s: 2,
            retry_period_s: 1,
        }
    }
}

/// A running replica and its identity in the Lease.
struct Replica {
    identity: String,
    operator: Operator,
}

pub(crate) async fn run(
    host: &Host<'_>,
    options: &FailoverOptions,
) -> Result<(Section, Goal), String> {
    if options.kills == 0 {
        return Err("failover: at least one kill".into());
    }
    let (control, child) = control_and_child(host, (CONTROL, CHILD), NAMESPACE).await?;
    let children: Api<Deployment> = Api::namespaced(child, NAMESPACE);
    let mut spawned = 0;
    let mut replicas = Vec::new();
    for _ in 0..REPLICAS {
        replicas.push(spawn(host, options, &mut spawned).await?);
    }
    create_parent(&control, "warm-up").await?;
    until_child(&children, "warm-up", Instant::now()).await?;

    let (mut lease_s, mut child_s) = (Vec::new(), Vec::new());
    for kill in 0..options.kills {
        let leader = until_held_by_one_of(&control, &replicas).await?;
        let index = replicas
            .iter()
            .position(|r| r.identity == leader)
            .ok_or("the leader is not a replica")?;
        let victim = replicas.remove(index);
        // At a random point of the renewal cycle: otherwise the section's own rhythm (a takeover, a
        // replacement's start, a kill) would kill at the same phase every time.
        tokio::time::sleep(jitter(Duration::from_secs(2 * options.retry_period_s))).await;
        victim.operator.kill().await?;
        let killed = Instant::now();
        let parent = format!("after-kill-{kill}");
        create_parent(&control, &parent).await?;
        let (mut took_lease, mut applied) = (None, None);
        while took_lease.is_none() || applied.is_none() {
            if killed.elapsed() > ROUND {
                return Err(format!(
                    "failover: after killing {leader}, no takeover within {ROUND:?} (Lease taken after \
                     {took_lease:?}, child after {applied:?})"
                ));
            }
            if took_lease.is_none() && holder(&control).await?.is_some_and(|h| h != leader) {
                took_lease = Some(killed.elapsed());
            }
            if applied.is_none() && child_exists(&children, &parent).await? {
                applied = Some(killed.elapsed());
            }
            tokio::time::sleep(POLL).await;
        }
        let (took_lease, applied) = (
            took_lease.unwrap_or_default().as_secs_f64(),
            applied.unwrap_or_default().as_secs_f64(),
        );
        progress(&format!(
            "failover: kill {}/{}: Lease taken after {took_lease:.1} s, new parent's child after {applied:.1} s",
            kill + 1,
            options.kills
        ));
        lease_s.push(took_lease);
        child_s.push(applied);
        // A replacement, as a Deployment would start one: the next kill again finds two standbys.
        replicas.push(spawn(host, options, &mut spawned).await?);
    }
    // The parents go while a leader still runs, so that their finalizers come off and a fleet section after
    // this one starts clean.
    let parents: Api<FleetApp> = Api::namespaced(control.clone(), PARENT_NAMESPACE);
    parents
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .map_err(|e| format!("deleting the parents: {e}"))?;
    let deleting = Instant::now();
    while !parents
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("listing the parents: {e}"))?
        .items
        .is_empty()
    {
        if deleting.elapsed() > ROUND {
            return Err(format!(
                "failover: the parents were not gone within {ROUND:?}"
            ));
        }
        tokio::time::sleep(POLL).await;
    }
    for replica in replicas {
        replica.operator.kill().await?;
    }
    Ok(report(options, &lease_s, &child_s))
}

fn report(options: &FailoverOptions, lease_s: &[f64], child_s: &[f64]) -> (Section, Goal) {
    let (p50, max) = (percentile(child_s, 50.0), percentile(child_s, 100.0));
    let (lease, renew, retry) = (
        options.lease_duration_s,
        options.renew_deadline_s,
        options.retry_period_s,
    );
    let section = Section {
        title: "failover after a SIGKILLed leader".into(),
        method: format!(
            "{REPLICAS} replicas of the fleet operator (kubeplex side), each its own process, with leader \
             election on the Lease {NAMESPACE}/{LEASE} in {CONTROL} (lease {lease} s, renew deadline \
             {renew} s, retry {retry} s); {} times: SIGKILL the holder (after a random 0-{} s, so \
             that kills fall anywhere in the renewal cycle), create a new parent at once, poll every {} ms until another replica holds the Lease and until the new parent's \
             Deployment exists in {CHILD}; then start a replacement replica. Times from the SIGKILL.",
            options.kills,
            2 * retry,
            POLL.as_millis()
        ),
        figures: vec![
            Figure::new("SIGKILL -> Lease held by another", "s", &[], lease_s),
            Figure::new("SIGKILL -> new parent's child applied", "s", &[], child_s),
        ],
        notes: vec![
            format!(
                "new parent's child applied after the kill: p50 {p50:.1} s, max {max:.1} s over {} kills \
                 (Lease taken: p50 {:.1} s, max {:.1} s)",
                child_s.len(),
                percentile(lease_s, 50.0),
                percentile(lease_s, 100.0)
            ),
            format!(
                "expected: a standby takes the Lease once it has seen it unchanged for {lease} s \
                 (it polls every {retry} s, so it sees the last renewal up to {retry} s late \
                 and acts up to {retry} s later), counted from the last renewal, which came up to \
                 {retry} s before the kill: between {} and {} s",
                lease - retry,
                lease + 2 * retry
            ),
        ],
    };
    let goal = Goal {
        section: "failover",
        goal: format!("a killed leader's successor reconciles a new parent within {GOAL_S} s"),
        measured: format!("p50 {p50:.1} s, max {max:.1} s"),
        met: max <= GOAL_S,
    };
    (section, goal)
}

/// Starts a replica and waits until its caches synced (a standby syncs too).
async fn spawn(
    host: &Host<'_>,
    options: &FailoverOptions,
    spawned: &mut usize,
) -> Result<Replica, String> {
    let identity = format!("failover-{spawned}");
    let spec = FleetSpec {
        election: Some(ElectionSpec {
            namespace: NAMESPACE.to_owned(),
            name: LEASE.to_owned(),
            identity: identity.clone(),
            lease_duration_s: options.lease_duration_s,
            renew_deadline_s: options.renew_deadline_s,
            retry_period_s: options.retry_period_s,
        }),
        ..one_child_spec(host, (CONTROL, CHILD), NAMESPACE)
    };
    let mut operator = Operator::spawn(host, &spec, 1000 + *spawned)?;
    *spawned += 1;
    let _: Synced = operator.next("its caches synced").await?;
    Ok(Replica { identity, operator })
}

async fn create_parent(control: &Client, name: &str) -> Result<(), String> {
    let parent = FleetApp {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(PARENT_NAMESPACE.to_owned()),
            ..ObjectMeta::default()
        },
        spec: FleetAppSpec {
            image: "registry.example/app:failover".into(),
            replicas: 1,
            namespaces: vec![NAMESPACE.to_owned()],
        },
        status: None,
    };
    Api::<FleetApp>::namespaced(control.clone(), PARENT_NAMESPACE)
        .create(&PostParams::default(), &parent)
        .await
        .map(|_| ())
        .map_err(|e| format!("creating parent {name}: {e}"))
}

async fn holder(control: &Client) -> Result<Option<String>, String> {
    let lease = Api::<Lease>::namespaced(control.clone(), NAMESPACE)
        .get_opt(LEASE)
        .await
        .map_err(|e| format!("reading the Lease: {e}"))?;
    Ok(lease
        .and_then(|l| l.spec?.holder_identity)
        .filter(|h| !h.is_empty()))
}

/// The holder, once it is one of `replicas`.
async fn until_held_by_one_of(control: &Client, replicas: &[Replica]) -> Result<String, String> {
    let started = Instant::now();
    loop {
        let holder = holder(control).await?;
        if let Some(holder) = holder.filter(|h| replicas.iter().any(|r| &r.identity == h)) {
            return Ok(holder);
        }
        if started.elapsed() > ROUND {
            return Err(format!(
                "failover: no replica held the Lease within {ROUND:?}"
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

async fn child_exists(children: &Api<Deployment>, name: &str) -> Result<bool, String> {
    children
        .get_opt(name)
        .await
        .map(|d| d.is_some())
        .map_err(|e| format!("reading child {name}: {e}"))
}

async fn until_child(children: &Api<Deployment>, name: &str, from: Instant) -> Result<(), String> {
    while !child_exists(children, name).await? {
        if from.elapsed() > ROUND {
            return Err(format!("failover: no child for {name} within {ROUND:?}"));
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(())
}
