//! Sharded mode on a real API server, three replicas in one process: the shards are split between them
//! with no overlap and every parent is reconciled (and written) by the owner of its shard only; when a
//! replica leaves, only its shards move and their parents are reconciled by the new owners at once; when it
//! comes back, it gets the same shards again. Sharded by context, six contexts (aliases of the one server)
//! are the shards, and a change is reconciled in each by the replica that holds it only.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use crate::support::{
    Fleet, Recorder, WAIT, create_namespace, probe, put_config_map, wait_started,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kubeplex::prelude::*;
use kubeplex::{Manager, ha::Sharding};
use kubeplex_testenv::{Polling, TestEnv, eventually};

pub mod by_context;

/// The suite's clusters, with this module's kinds installed.
pub(crate) async fn env() -> &'static TestEnv {
    crate::support::clusters([]).await
}

const NAMESPACE: &str = "sharded";
const PARENTS: usize = 40;
const SHARDS: u16 = 12;
/// The annotation each reconcile writes: `<identity>:<data.value>`.
const MARK: &str = "tests.kubeplex.io/reconciled";

#[controller(crd = ConfigMap, contexts = [Fleet::Control], namespaces = ["sharded"])]
#[derive(Clone)]
struct Sharded {
    identity: &'static str,
    seen: Recorder,
}

impl Reconcile for Sharded {
    type Error = kubeplex::Error;

    async fn reconcile(
        &self,
        object: Arc<ConfigMap>,
        cx: &Cx<Fleet>,
    ) -> Result<Action, Self::Error> {
        self.seen.record(cx.cluster(), &object);
        let value = object.data.as_ref().and_then(|d| d.get("value")).cloned();
        let mark = format!("{}:{}", self.identity, value.unwrap_or_default());
        let current = object
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(MARK));
        if current != Some(&mark) {
            // Through the reconcile's client: fenced by the parent's shard.
            let api: Api<ConfigMap> = cx.api(cx.cluster(), NAMESPACE)?;
            let patch = serde_json::json!({"metadata": {"annotations": {MARK: mark}}});
            let name = object.metadata.name.clone().unwrap_or_default();
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|source| kubeplex::Error::Kube {
                    cluster: cx.cluster().name().to_owned(),
                    source,
                })?;
        }
        Ok(Action::await_change())
    }
}

fn sharding(identity: &str) -> Sharding {
    // Short timings keep the test quick; they keep the fencing order (retry < renew deadline < lease).
    Sharding::by_parent(Fleet::Control, NAMESPACE, "sharded", SHARDS)
        .with_identity(identity)
        .lease_duration(Duration::from_secs(4))
        .renew_deadline(Duration::from_secs(3))
        .retry_period(Duration::from_millis(500))
}

struct Replica {
    running: kubeplex::Running,
    seen: Recorder,
}

async fn replica(env: &TestEnv, identity: &'static str) -> Replica {
    let seen = Recorder::default();
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .probes("127.0.0.1:0")
        .sharding(sharding(identity))
        .controller(Sharded {
            identity,
            seen: seen.clone(),
        })
        .start()
        .await
        .unwrap();
    wait_started(&running, identity).await;
    Replica { running, seen }
}

/// The shards each replica says (in `/readyz`) it holds, once all of them agree on `members` and the
/// shards are split between them without overlap or gap.
async fn settled(replicas: &[(&str, &Replica)]) -> BTreeMap<String, BTreeSet<String>> {
    let running: Vec<(&str, &kubeplex::Running)> =
        replicas.iter().map(|(n, r)| (*n, &r.running)).collect();
    split(&running, usize::from(SHARDS)).await
}

/// [`settled`], for any replicas and any number of shards.
async fn split(
    replicas: &[(&str, &kubeplex::Running)],
    shard_count: usize,
) -> BTreeMap<String, BTreeSet<String>> {
    let deadline = tokio::time::Instant::now() + WAIT;
    let members: BTreeSet<&str> = replicas.iter().map(|(name, _)| *name).collect();
    loop {
        let mut held = BTreeMap::new();
        let mut agreed = true;
        for (name, replica) in replicas {
            let (status, body) = probe(replica.probe_address().unwrap(), "/readyz").await;
            // Sharded by context, a context just taken over is `starting` until its watches have listed.
            agreed &= status == 200;
            let sharding = &body["sharding"];
            assert_eq!(sharding["identity"], *name, "{body}");
            let listed: BTreeSet<&str> = sharding["members"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m.as_str())
                .collect();
            agreed &= listed == members;
            let shards = sharding["shards"].as_array().into_iter().flatten();
            held.insert(
                (*name).to_owned(),
                shards
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect(),
            );
        }
        let all: Vec<&String> = held.values().flatten().collect();
        let distinct: BTreeSet<&&String> = all.iter().collect();
        if agreed && all.len() == shard_count && distinct.len() == all.len() {
            return held;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the shards did not settle among {members:?}: {held:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Sets every parent's value, then waits until each is marked with it; returns who marked each.
async fn round(env: &TestEnv, value: &str) -> BTreeMap<String, String> {
    let control = env.client("control").await.unwrap();
    for i in 0..PARENTS {
        put_config_map(&control, NAMESPACE, &format!("parent-{i}"), value).await;
    }
    let api: Api<ConfigMap> = Api::namespaced(control, NAMESPACE);
    let what = format!("every parent marked with {value}");
    let polling = Polling::within(WAIT).every(Duration::from_millis(200));
    eventually(what, polling, async || {
        let mut marked = BTreeMap::new();
        for object in api.list(&Default::default()).await.unwrap() {
            let mark = object
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(MARK));
            if let Some((who, seen)) = mark.and_then(|m| m.split_once(':'))
                && seen == value
            {
                marked.insert(object.metadata.name.clone().unwrap(), who.to_owned());
            }
        }
        if marked.len() == PARENTS {
            Ok(marked)
        } else {
            Err(format!("only {} of {PARENTS}: {marked:?}", marked.len()))
        }
    })
    .await
}

/// The parents `replica` reconciled with `value`.
fn reconciled(replica: &Replica, value: &str) -> BTreeSet<String> {
    let seen = replica.seen.all().into_iter();
    seen.filter(|s| s.value.as_deref() == Some(value))
        .map(|s| s.name)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_split_the_parents_and_only_a_leaving_replicas_shards_move() {
    let env = env().await;
    let control = env.client("control").await.unwrap();
    create_namespace(&control, NAMESPACE).await;
    for i in 0..PARENTS {
        put_config_map(&control, NAMESPACE, &format!("parent-{i}"), "1").await;
    }
    let (a, b, c) = (
        replica(env, "replica-a").await,
        replica(env, "replica-b").await,
        replica(env, "replica-c").await,
    );
    let three = [("replica-a", &a), ("replica-b", &b), ("replica-c", &c)];
    let before = settled(&three).await;
    assert!(
        before.values().all(|shards| !shards.is_empty()),
        "a replica holds no shard: {before:?}"
    );

    // Every parent is reconciled and written by exactly one replica: the owner of its shard.
    let owners = round(env, "2").await;
    for (name, replica) in three {
        let theirs: BTreeSet<String> = owners
            .iter()
            .filter(|(_, who)| *who == name)
            .map(|(parent, _)| parent.clone())
            .collect();
        assert!(!theirs.is_empty(), "{name} owns no parent: {owners:?}");
        assert_eq!(
            reconciled(replica, "2"),
            theirs,
            "{name} reconciled another's parents"
        );
    }

    // replica-b leaves: only its shards move, and their parents are reconciled by the new owners at once,
    // without a change to them.
    crate::support::stop(b.running).await;
    let two = [("replica-a", &a), ("replica-c", &c)];
    let after = settled(&two).await;
    for name in ["replica-a", "replica-c"] {
        assert!(
            after[name].is_superset(&before[name]),
            "{name} lost a shard though it stayed: before {before:?}, after {after:?}"
        );
    }
    let bs: BTreeSet<String> = owners
        .iter()
        .filter(|(_, who)| *who == "replica-b")
        .map(|(parent, _)| parent.clone())
        .collect();
    let deadline = tokio::time::Instant::now() + WAIT;
    while !bs.is_subset(&(&reconciled(&a, "2") | &reconciled(&c, "2"))) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "replica-b's parents were not reconciled after it left"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let moved = round(env, "3").await;
    for (parent, owner) in &owners {
        if owner != "replica-b" {
            assert_eq!(
                &moved[parent], owner,
                "{parent} moved though its owner stayed"
            );
        }
    }

    // replica-b comes back: rendezvous hashing gives it the same shards, and the others give them up.
    let b = replica(env, "replica-b").await;
    let three = [("replica-a", &a), ("replica-b", &b), ("replica-c", &c)];
    assert_eq!(settled(&three).await, before);
    assert_eq!(round(env, "4").await, owners);
    for replica in [a, b, c] {
        crate::support::stop(replica.running).await;
    }
}

/// The error `manager`, running the test's controller, refuses to start with.
async fn refusal(manager: Manager) -> String {
    let controller = Sharded {
        identity: "replica-x",
        seen: Recorder::default(),
    };
    let refused = manager.controller(controller).start().await.err();
    refused.expect("refused").to_string()
}

#[tokio::test]
async fn sharding_and_leader_election_together_are_refused() {
    let env = env().await;
    let manager = || Manager::with_kubeconfig(env.kubeconfig().clone());
    let election = kubeplex::ha::LeaderElection::new(Fleet::Control, NAMESPACE, "x");
    assert_eq!(
        refusal(
            manager()
                .sharding(sharding("replica-x"))
                .leader_election(election)
        )
        .await,
        "sharding (group sharded/sharded): leader election is on as well; choose one of the two"
    );
    let no_shards = Sharding::by_parent(Fleet::Control, NAMESPACE, "sharded", 0);
    assert_eq!(
        refusal(manager().sharding(no_shards)).await,
        "sharding (group sharded/sharded): the number of shards must be at least 1"
    );
    // Sharded by context, a controller watching its primaries in every member: a member is no shard.
    let by_context = Sharding::by_context(Fleet::Control, NAMESPACE, "sharded");
    let everywhere = manager().sharding(by_context).controller_with(
        Sharded {
            identity: "x",
            seen: Recorder::default(),
        },
        |plan| plan.members(),
    );
    assert_eq!(
        refusal(everywhere).await,
        "sharding (group sharded/sharded): sharded by context, the primaries watched in members would have no shard; shard by parent"
    );
}
