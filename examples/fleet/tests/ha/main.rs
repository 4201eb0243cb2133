//! `fleet run --leader-election` (and `--shards`, in `sharded.rs`) as separate processes on real clusters, judged from the API servers' own
//! audit logs (every request with its verb, object, time and `User-Agent`, which names the replica):
//! one of three replicas leads; a killed leader is replaced; a frozen and thawed leader writes nothing after
//! its lease deadline, anywhere; a leader cut off from the control cluster stops writing to the child
//! clusters it still reaches; a rolling replacement loses no change; a standby answers the admission
//! webhooks while the leader is frozen (`webhooks.rs`).
//!
//! The tests share one set of clusters, each in namespaces of its own (the parents', the Lease's and the
//! children's), so their replicas never meet. The replicas run with short timings ([`TIMINGS`]), so that a
//! takeover costs seconds; the rolling replacement, which waits out no Lease, runs the defaults.

use kube::CustomResourceExt as _;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kubeplex::Context as _;
use kubeplex_fleet::{AppDeployment, Fleet};
use kubeplex_testenv::{Polling, SharedTestEnv, TestEnv, try_eventually};

/// The cases and their tools, one file each beside this one.
pub mod audit;
pub mod freezes;
pub mod replica;
pub mod sharded;
pub mod webhooks;

use audit::{after, fence_deadline, writes_of};
use replica::{Replica, Timings, logs, until};

const WAIT: Duration = Duration::from_secs(60);
const LEASE: &str = "fleet-operator";
/// The replicas' timings, short so that a takeover costs seconds: a lease of 5 s, renewed every second, and
/// a fence that closes 4 s after a renewal's send — 1 s before any successor can exist, where the bytes of
/// a write already handed to the kernel need a loopback transit (docs/ha.md, the fence). A renewal round
/// has 3 s to come back before the fence lapses, some 30 times what it takes on an idle machine.
const TIMINGS: Timings = Timings {
    lease_duration: Duration::from_secs(5),
    renew_deadline: Duration::from_secs(4),
    retry_period: Duration::from_secs(1),
};
const CLUSTERS: [Fleet; 3] = [Fleet::Control, Fleet::ClusterA, Fleet::ClusterB];

static ENV: SharedTestEnv = SharedTestEnv::new(|| {
    TestEnv::builder()
        .clusters(CLUSTERS.map(|c| c.name()))
        .crd(Fleet::Control.name(), AppDeployment::crd())
        .audit_log(true)
});

/// A namespace of its own in every cluster: the parents, the Lease and the children all go there.
async fn setup(prefix: &str) -> (&'static TestEnv, String, Client) {
    let env = ENV.get().await.unwrap();
    let namespace = env
        .create_namespace(&CLUSTERS.map(|c| c.name()), prefix)
        .await
        .unwrap();
    let control = env.client(Fleet::Control.name()).await.unwrap();
    (env, namespace, control)
}

async fn holder(control: &Client, namespace: &str) -> Option<String> {
    let lease = Api::<Lease>::namespaced(control.clone(), namespace)
        .get_opt(LEASE)
        .await
        .ok()??;
    lease.spec?.holder_identity.filter(|h| !h.is_empty())
}

/// Waits until exactly one of `replicas` leads, the others stand by naming it, and the Lease agrees;
/// returns the leader's index.
async fn one_leader(control: &Client, namespace: &str, replicas: &[&Replica]) -> usize {
    until("exactly one leader", WAIT, replicas, async || {
        let mut roles = Vec::new();
        for replica in replicas {
            roles.push(
                replica
                    .role()
                    .await
                    .ok_or(format!("{} does not answer", replica.identity))?,
            );
        }
        let leaders: Vec<usize> = (0..roles.len())
            .filter(|&i| roles[i].0 == "leader")
            .collect();
        let [leader] = leaders[..] else {
            return Err(format!("roles {roles:?}"));
        };
        let name = &replicas[leader].identity;
        let agree = roles.iter().all(|(_, h)| h == name);
        let lease = holder(control, namespace).await;
        if agree && lease.as_deref() == Some(name) {
            Ok(leader)
        } else {
            Err(format!("roles {roles:?}, Lease held by {lease:?}"))
        }
    })
    .await
}

/// Creates or changes the parent `name` (server-side apply).
async fn apply(control: &Client, namespace: &str, name: &str, image: &str) {
    let api: Api<AppDeployment> = Api::namespaced(control.clone(), namespace);
    let object = serde_json::json!({
        "apiVersion": "demo.kubeplex.dev/v1", "kind": "AppDeployment",
        "metadata": { "name": name },
        "spec": { "image": image, "replicas": 1 },
    });
    api.patch(name, &PatchParams::apply("ha-test"), &Patch::Apply(&object))
        .await
        .unwrap();
}

/// Waits until both child clusters run `name` with `image`.
async fn converged(env: &TestEnv, namespace: &str, name: &str, image: &str, replicas: &[&Replica]) {
    let mut apis = Vec::new();
    for cluster in [Fleet::ClusterA, Fleet::ClusterB] {
        let client = env.client(cluster.name()).await.unwrap();
        apis.push((cluster, Api::<Deployment>::namespaced(client, namespace)));
    }
    let what = format!("Deployment {namespace}/{name} with {image} in both child clusters");
    until(&what, WAIT, replicas, async || {
        for (cluster, api) in &apis {
            let found = api.get_opt(name).await.map_err(|e| e.to_string())?;
            let has = found.as_ref().and_then(|d| {
                d.spec
                    .template
                    .spec
                    .as_ref()?
                    .containers
                    .first()?
                    .image
                    .clone()
            });
            if has.as_deref() != Some(image) {
                return Err(format!("{cluster}: {has:?}"));
            }
        }
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn three_replicas_one_leads_and_a_killed_leader_is_replaced_within_the_bound() {
    let (env, ns, control) = setup("ha-kill").await;
    let mut replicas: Vec<Replica> = (1..=3)
        .map(|n| Replica::start(env, &ns, &format!("kill-{n}")))
        .collect();
    let all: Vec<&Replica> = replicas.iter().collect();
    let leader = one_leader(&control, &ns, &all).await;
    apply(&control, &ns, "before", "nginx:1.27").await;
    converged(env, &ns, "before", "nginx:1.27", &all).await;

    let killed = replicas.remove(leader);
    let killed_name = killed.identity.clone();
    let survivors: Vec<&Replica> = replicas.iter().collect();
    let started = tokio::time::Instant::now();
    drop(killed); // SIGKILL: the Lease is not released, it expires
    apply(&control, &ns, "after", "nginx:1.28").await;
    converged(env, &ns, "after", "nginx:1.28", &survivors).await;
    let failover = started.elapsed();
    let bound = TIMINGS.failover_bound();
    eprintln!("SIGKILL of the leader -> a new parent's children in both clusters: {failover:?}");
    assert!(
        failover <= bound,
        "failover took {failover:?} (bound {bound:?})\n{}",
        logs(&survivors)
    );
    let next = one_leader(&control, &ns, &survivors).await;
    let next_name = &survivors[next].identity;
    let wrote = writes_of(env, next_name);
    assert!(
        wrote
            .iter()
            .any(|w| w.cluster != Fleet::Control && w.what == format!("deployments {ns}/after")),
        "the audit logs do not show {next_name} applying the new parent's children: {wrote:#?}"
    );
    assert!(
        writes_of(env, &killed_name)
            .iter()
            .all(|w| !w.what.ends_with("/after")),
        "the killed replica wrote the new parent"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_frozen_leader_writes_nothing_after_its_deadline_and_comes_back_as_standby() {
    let (env, ns, control) = setup("ha-stop").await;
    let replicas: Vec<Replica> = (1..=3)
        .map(|n| Replica::start(env, &ns, &format!("stop-{n}")))
        .collect();
    let all: Vec<&Replica> = replicas.iter().collect();
    let leader = one_leader(&control, &ns, &all).await;
    let frozen = &replicas[leader];
    let others: Vec<&Replica> = replicas
        .iter()
        .filter(|r| r.identity != frozen.identity)
        .collect();
    apply(&control, &ns, "steady", "nginx:1.27").await;
    converged(env, &ns, "steady", "nginx:1.27", &all).await;

    frozen.signal("STOP");
    let stopped = tokio::time::Instant::now();
    // Parents keep changing during the freeze (two and a half lease durations, and on until the others
    // converged below), every two retry periods.
    let freeze = TIMINGS.lease_duration.mul_f64(2.5);
    let mut round = 0;
    while stopped.elapsed() < freeze {
        round += 1;
        apply(&control, &ns, "steady", &format!("nginx:1.{}", 27 + round)).await;
        apply(&control, &ns, &format!("new-{round}"), "redis:7.4").await;
        tokio::time::sleep(TIMINGS.retry_period * 2).await;
    }
    let image = format!("nginx:1.{}", 27 + round);
    converged(env, &ns, "steady", &image, &others).await;
    converged(env, &ns, &format!("new-{round}"), "redis:7.4", &others).await;
    let successor = holder(&control, &ns).await.expect("a holder");
    assert_ne!(
        successor, frozen.identity,
        "nobody took over from the frozen leader"
    );

    let frozen_for = stopped.elapsed();
    frozen.signal("CONT");
    // Thawed, it finds its deadline passed, refuses its own pending writes and stands by.
    until(
        "the thawed replica stands by",
        WAIT,
        &all,
        async || match frozen.role().await {
            Some((role, holder)) if role == "standby" && holder == successor => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
    // More work after the thaw, which it sees and must leave to the leader.
    apply(&control, &ns, "steady", "nginx:2.0").await;
    apply(&control, &ns, "after-thaw", "redis:8.0").await;
    converged(env, &ns, "steady", "nginx:2.0", &others).await;
    converged(env, &ns, "after-thaw", "redis:8.0", &others).await;

    let writes = writes_of(env, &frozen.identity);
    assert!(
        writes
            .iter()
            .any(|w| w.what == format!("deployments {ns}/steady")),
        "the audit logs show no write of the leader before the freeze: the check would prove nothing"
    );
    let deadline = fence_deadline(&writes, &ns);
    let late = after(&writes, deadline);
    assert!(
        late.is_empty(),
        "{} wrote after its lease deadline {deadline}:\n{}\n{}",
        frozen.identity,
        late.join("\n"),
        frozen.log()
    );
    let successor_writes = writes_of(env, &successor);
    assert!(
        successor_writes
            .iter()
            .any(|w| w.at > deadline && w.cluster != Fleet::Control),
        "the new leader wrote no child after the old one's deadline"
    );
    eprintln!(
        "{} frozen {:?}: {} writes before its deadline {deadline}, none after; {successor} wrote {} after",
        frozen.identity,
        frozen_for,
        writes.len(),
        successor_writes.iter().filter(|w| w.at > deadline).count()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rolling_replacement_hands_over_at_once_and_loses_no_change() {
    let (env, ns, control) = setup("ha-roll").await;
    // The default timings: a hand-over within a retry period (2 s) stands far apart from a Lease waited out
    // (at least 13 s), and no step of this test waits for a Lease to expire.
    let timings = Timings::DEFAULT;
    let mut replicas = vec![
        Replica::start_timed(env, &ns, "roll-1", timings),
        Replica::start_timed(env, &ns, "roll-2", timings),
    ];
    let leader = one_leader(&control, &ns, &replicas.iter().collect::<Vec<_>>()).await;
    apply(&control, &ns, "app", "nginx:1.27").await;
    converged(
        env,
        &ns,
        "app",
        "nginx:1.27",
        &replicas.iter().collect::<Vec<_>>(),
    )
    .await;

    // The new one first (maxSurge 1), then the old leader goes (SIGTERM: it releases the Lease).
    replicas.push(Replica::start_timed(env, &ns, "roll-3", timings));
    one_leader(&control, &ns, &replicas.iter().collect::<Vec<_>>()).await;
    let mut old = replicas.remove(leader);
    apply(&control, &ns, "app", "nginx:1.28").await;
    old.signal("TERM");
    let started = tokio::time::Instant::now();
    apply(&control, &ns, "app", "nginx:1.29").await;
    apply(&control, &ns, "during", "redis:7.4").await;
    let rest: Vec<&Replica> = replicas.iter().collect();
    let exit = until("the old leader exits on SIGTERM", WAIT, &rest, async || {
        old.child
            .try_wait()
            .map_err(|e| e.to_string())?
            .ok_or("running".to_owned())
    })
    .await;
    assert!(exit.success(), "{exit}\n{}", old.log());
    let next = one_leader(&control, &ns, &rest).await;
    let handover = started.elapsed();
    eprintln!(
        "SIGTERM of the leader -> {} leads: {handover:?}",
        rest[next].identity
    );
    assert!(
        handover < timings.lease_duration,
        "the hand-over took {handover:?}: the Lease was waited out instead of released\n{}",
        old.log()
    );
    converged(env, &ns, "app", "nginx:1.29", &rest).await;
    converged(env, &ns, "during", "redis:7.4", &rest).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_leader_cut_off_from_the_control_cluster_stops_writing_to_the_children() {
    let (env, ns, control) = setup("ha-cut").await;
    let relay = env.relay(Fleet::Control.name()).await.unwrap();
    let cut_off = Replica::start_with(&env.kubeconfig_path_via(&relay).unwrap(), &ns, "cut-1");
    one_leader(&control, &ns, &[&cut_off]).await;
    let other = Replica::start(env, &ns, "cut-2");
    let both = [&cut_off, &other];
    assert_eq!(
        one_leader(&control, &ns, &both).await,
        0,
        "the first replica leads"
    );
    apply(&control, &ns, "app", "nginx:1.27").await;
    converged(env, &ns, "app", "nginx:1.27", &both).await;

    // Only cut-1 loses the control cluster; it still reaches both child clusters.
    relay.cut();
    until(
        "the other replica takes the Lease",
        WAIT,
        &both,
        async || match holder(&control, &ns).await {
            Some(h) if h == other.identity => Ok(()),
            h => Err(format!("held by {h:?}")),
        },
    )
    .await;
    // The children vanish from the child clusters: both replicas see it (cut-1 through its child watches)
    // and want them back; only the leader may put them back.
    for cluster in [Fleet::ClusterA, Fleet::ClusterB] {
        let client = env.client(cluster.name()).await.unwrap();
        Api::<Deployment>::namespaced(client, &ns)
            .delete("app", &Default::default())
            .await
            .unwrap();
    }
    apply(&control, &ns, "app", "nginx:1.28").await;
    converged(env, &ns, "app", "nginx:1.28", &both).await;
    // cut-1 stops leading at its deadline: its Lease requests go unanswered and each attempt is bounded by
    // the renew deadline, so it steps down (its controllers stop); a repair already under way when the
    // deadline passed would be refused by its fence ("not the leader"). Either way, no late write below.
    until(
        "cut-1 steps down, or has a write refused",
        WAIT,
        &both,
        async || {
            let log = cut_off.log();
            // The election's own line: the controllers' "no longer the leader" waits for the reconciles
            // in flight, and one hung on the black-holed control cluster may take long to fail.
            if log.contains("leader=false") || log.contains("not the leader") {
                Ok(())
            } else {
                Err("still acting as the leader".into())
            }
        },
    )
    .await;

    let writes = writes_of(env, &cut_off.identity);
    let deadline = fence_deadline(&writes, &ns);
    let late = after(&writes, deadline);
    assert!(
        late.is_empty(),
        "cut-1 wrote after its lease deadline {deadline}:\n{}\n{}",
        late.join("\n"),
        cut_off.log()
    );
    // Its Lease requests hang in the black hole; each attempt is bounded, so it knows it no longer leads:
    // its probe says so and its controllers stop.
    let polling = Polling::within(Duration::from_secs(30)).every(Duration::from_millis(500));
    let stepped_down = try_eventually(
        "cut-1 cut off from control standing by",
        polling,
        async || match cut_off.role().await {
            Some((role, _)) if role == "standby" => Ok(()),
            other => Err(format!("it still says {other:?}")),
        },
    )
    .await;
    if let Err(timeout) = stepped_down {
        panic!("{timeout}\n{}", cut_off.log());
    }
    eprintln!(
        "cut-1 cut off from control: {} writes before its deadline {deadline}, none after; standby now",
        writes.len()
    );
}
