//! `fleet run --shards 12` as three processes, 120 parents: the replicas split the shards without overlap;
//! the API servers' audit logs show every parent and each of its children written by exactly one replica
//! at a time; a killed replica's shards are taken over (and only those move); when it comes back it gets
//! the same shards again and the others hand them back.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kubeplex::Context as _;
use kubeplex_fleet::Fleet;
use kubeplex_testenv::TestEnv;

use super::audit::{after, lease_deadline, writes_of};
use super::replica::{Replica, until};
use crate::{LEASE, WAIT, apply, setup};

/// Ten a shard on average: each replica, holding about four shards, writes some.
const PARENTS: usize = 120;
const SHARDS: u16 = 12;

/// The shards each replica holds, once all of them name the same members and the shards are split between
/// them with no overlap and no gap.
async fn settled(replicas: &[&Replica]) -> BTreeMap<String, BTreeSet<String>> {
    split(replicas, SHARDS).await
}

/// [`settled`] for `shard_count` shards.
pub(super) async fn split(
    replicas: &[&Replica],
    shard_count: u16,
) -> BTreeMap<String, BTreeSet<String>> {
    let members: Vec<String> = {
        let mut names: Vec<String> = replicas.iter().map(|r| r.identity.clone()).collect();
        names.sort();
        names
    };
    until(
        "the shards split between the replicas",
        WAIT,
        replicas,
        async || {
            let mut held = BTreeMap::new();
            for replica in replicas {
                let (listed, shards) = replica
                    .shards()
                    .await
                    .ok_or(format!("{} does not answer", replica.identity))?;
                if listed != members {
                    return Err(format!("{} sees members {listed:?}", replica.identity));
                }
                held.insert(replica.identity.clone(), shards.into_iter().collect());
            }
            let all: Vec<&String> = held.values().flatten().collect();
            let distinct: BTreeSet<&String> = all.iter().copied().collect();
            if all.len() == usize::from(shard_count) && distinct.len() == all.len() {
                Ok(held)
            } else {
                Err(format!("shards held: {held:?}"))
            }
        },
    )
    .await
}

/// Gives every parent `image` and waits until both child clusters run it for each.
async fn roll(env: &TestEnv, ns: &str, image: &str, replicas: &[&Replica]) {
    roll_some(env, ns, PARENTS, image, replicas).await;
}

/// [`roll`] for the first `parents` parents.
async fn roll_some(env: &TestEnv, ns: &str, parents: usize, image: &str, replicas: &[&Replica]) {
    let control = env.client(Fleet::Control.name()).await.unwrap();
    for i in 0..parents {
        apply(&control, ns, &format!("app-{i}"), image).await;
    }
    let mut apis = Vec::new();
    for cluster in [Fleet::ClusterA, Fleet::ClusterB] {
        let client = env.client(cluster.name()).await.unwrap();
        apis.push((cluster, Api::<Deployment>::namespaced(client, ns)));
    }
    let what = format!("{parents} parents' Deployments with {image} in both child clusters");
    until(&what, WAIT * 3, replicas, async || {
        for (cluster, api) in &apis {
            let list = api
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            let with = list
                .items
                .iter()
                .filter(|d| image_of(d) == Some(image))
                .count();
            if with < parents {
                return Err(format!("{cluster}: {with} of {parents}"));
            }
        }
        Ok(())
    })
    .await;
}

fn image_of(deployment: &Deployment) -> Option<&str> {
    let spec = deployment.spec.template.spec.as_ref()?;
    spec.containers.first()?.image.as_deref()
}

/// Per object of `ns` (a parent in the control cluster, a child in a child cluster), the replicas that
/// wrote it between `from` and `to`, in the order of their writes (a run of writes by one replica counts
/// once).
fn writers(
    env: &TestEnv,
    ns: &str,
    identities: &[&str],
    from: Timestamp,
    to: Timestamp,
) -> BTreeMap<String, Vec<String>> {
    let mut writes = Vec::new();
    for identity in identities {
        for write in writes_of(env, identity) {
            let (_, object) = write.what.split_once(' ').unwrap_or_default();
            let is_parent_or_child =
                write.what.starts_with("appdeployments") || write.what.starts_with("deployments");
            if is_parent_or_child && object.starts_with(&format!("{ns}/")) {
                let key = format!("{} {}", write.cluster, object);
                writes.push((write.at, key, (*identity).to_owned()));
            }
        }
    }
    writes.retain(|(at, _, _)| *at >= from && *at <= to);
    writes.sort();
    let mut by_object: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (_, key, identity) in writes {
        let runs = by_object.entry(key).or_default();
        if runs.last() != Some(&identity) {
            runs.push(identity);
        }
    }
    by_object
}

/// Every object was written by exactly one replica; returns who wrote each parent (`app-<i>`).
fn one_writer_each(
    by_object: &BTreeMap<String, Vec<String>>,
    phase: &str,
) -> BTreeMap<String, String> {
    let mut owners = BTreeMap::new();
    for (object, runs) in by_object {
        assert_eq!(runs.len(), 1, "{phase}: {object} was written by {runs:?}");
        let parent = object.rsplit('/').next().unwrap().to_owned();
        let previous = owners.insert(parent.clone(), runs[0].clone());
        assert!(
            previous.as_ref().is_none_or(|p| *p == runs[0]),
            "{phase}: {parent}'s objects were written by {previous:?} and {}",
            runs[0]
        );
    }
    assert_eq!(
        owners.len(),
        PARENTS,
        "{phase}: not every parent was written: {owners:?}"
    );
    owners
}

#[tokio::test(flavor = "multi_thread")]
async fn three_sharded_replicas_split_the_parents_and_a_killed_ones_shards_alone_move() {
    let (env, ns, _) = setup("ha-shards").await;
    let names = ["shard-a", "shard-b", "shard-c"];
    // Short leases: after the kill a survivor renews up to 8 shard Leases a round, one after another, and a
    // round on a loaded machine can outlast the renew deadline. A shard fence that lapses while its replica
    // keeps the shard refuses the writes of the reconciles under way: the replica tries them again (nothing
    // else would queue them), and this test counts every parent.
    let timings = crate::TIMINGS;
    let mut replicas: Vec<Replica> = names
        .iter()
        .map(|name| Replica::start_sharded_timed(env, &ns, name, SHARDS, timings))
        .collect();
    let before = settled(&replicas.iter().collect::<Vec<_>>()).await;

    // Every parent and each of its children is written by one replica only.
    let start = Timestamp::now();
    roll(env, &ns, "nginx:1.27", &replicas.iter().collect::<Vec<_>>()).await;
    let owners = one_writer_each(
        &writers(env, &ns, &names, start, Timestamp::now()),
        "three replicas",
    );
    for name in names {
        assert!(
            owners.values().any(|o| o == name),
            "{name} wrote no parent: {owners:?}"
        );
    }

    // SIGKILL one: its shards are taken over within the bound, and no other shard moves.
    let killed = replicas.remove(1);
    let killed_name = killed.identity.clone();
    let started = tokio::time::Instant::now();
    drop(killed);
    let survivors: Vec<&Replica> = replicas.iter().collect();
    let after = settled(&survivors).await;
    let takeover = started.elapsed();
    eprintln!("SIGKILL of a sharded replica -> its shards held by the others: {takeover:?}");
    let bound = timings.failover_bound();
    assert!(
        takeover <= bound,
        "the takeover took {takeover:?} (bound {bound:?})"
    );
    for survivor in &survivors {
        let name = &survivor.identity;
        assert!(
            after[name].is_superset(&before[name]),
            "{name} lost a shard though it stayed: before {before:?}, after {after:?}"
        );
    }
    let start = Timestamp::now();
    roll(env, &ns, "nginx:1.28", &survivors).await;
    let moved = one_writer_each(
        &writers(env, &ns, &names, start, Timestamp::now()),
        "two replicas",
    );
    for (parent, owner) in &owners {
        if *owner == killed_name {
            assert_ne!(&moved[parent], owner);
        } else {
            assert_eq!(
                &moved[parent], owner,
                "{parent} moved though its owner stayed"
            );
        }
    }

    // It comes back: the same shards again, handed back without two writers at once.
    let back_at = Timestamp::now();
    let back = Replica::start_sharded_timed(env, &ns, &killed_name, SHARDS, timings);
    replicas.insert(1, back);
    let all: Vec<&Replica> = replicas.iter().collect();
    assert_eq!(
        settled(&all).await,
        before,
        "the shards did not rebalance as before"
    );
    let start = Timestamp::now();
    roll(env, &ns, "nginx:1.29", &all).await;
    let end = Timestamp::now();
    assert_eq!(
        one_writer_each(&writers(env, &ns, &names, start, end), "back to three"),
        owners
    );
    // From the return on, each object changed writer at most once (the handover), never back and forth.
    for (object, runs) in writers(env, &ns, &names, back_at, end) {
        assert!(
            runs.len() <= 2,
            "{object} was written by {runs:?} after {killed_name} came back"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sharded_replica_cut_off_from_the_control_cluster_stops_writing_to_the_children() {
    let (env, ns, _) = setup("ha-shard-cut").await;
    let relay = env.relay(Fleet::Control.name()).await.unwrap();
    let kubeconfig = env.kubeconfig_path_via(&relay).unwrap();
    let cut_off = Replica::start_sharded_with(&kubeconfig, &ns, "scut-1", 4);
    let other = Replica::start_sharded(env, &ns, "scut-2", 4);
    let both = [&cut_off, &other];
    let before = split(&both, 4).await;
    assert!(
        !before["scut-1"].is_empty(),
        "scut-1 holds no shard: {before:?}"
    );
    roll_some(env, &ns, 20, "nginx:1.27", &both).await;

    // Only scut-1 loses the control cluster; it still reaches both child clusters and watches them.
    relay.cut();
    until("scut-2 holds every shard", WAIT, &both, async || {
        let (members, shards) = other.shards().await.ok_or("scut-2 does not answer")?;
        if members == ["scut-2"] && shards.len() == 4 {
            Ok(())
        } else {
            Err(format!("scut-2 sees {members:?} and holds {shards:?}"))
        }
    })
    .await;
    // The children vanish: both replicas see it; only the owner of their shards puts them back.
    for cluster in [Fleet::ClusterA, Fleet::ClusterB] {
        let client = env.client(cluster.name()).await.unwrap();
        Api::<Deployment>::namespaced(client, &ns)
            .delete_collection(&Default::default(), &ListParams::default())
            .await
            .unwrap();
    }
    roll_some(env, &ns, 20, "nginx:1.28", &both).await;

    let writes = writes_of(env, &cut_off.identity);
    let member = format!("{LEASE}-member-{}", cut_off.identity);
    let deadline = lease_deadline(&writes, &ns, &member);
    let late = after(&writes, deadline);
    assert!(
        late.is_empty(),
        "scut-1 wrote after its member Lease's deadline {deadline}:\n{}\n{}",
        late.join("\n"),
        cut_off.log()
    );
    assert!(
        writes.iter().any(|w| w.what.starts_with("deployments")),
        "scut-1 wrote no child before the cut, so the test proves nothing: {writes:#?}"
    );
}
