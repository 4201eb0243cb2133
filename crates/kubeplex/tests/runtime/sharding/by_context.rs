//! Sharded by context: six contexts (aliases of the one test server) are the shards; each replica watches
//! and reconciles the primaries of the contexts it holds only, and when one leaves, the others take its
//! contexts over.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kubeplex::prelude::*;
use kubeplex::{Manager, ha::Sharding};

use super::{env, split};
use crate::support::{WAIT, create_namespace, probe, put_config_map, wait_started};

/// Six contexts, aliases of the one test server, each a shard of its own.
const ALIASES: [&str; 6] = ["ctx-0", "ctx-1", "ctx-2", "ctx-3", "ctx-4", "ctx-5"];

#[controller(
    crd = ConfigMap,
    contexts = ["ctx-0", "ctx-1", "ctx-2", "ctx-3", "ctx-4", "ctx-5"],
    namespaces = ["by-context"]
)]
#[derive(Clone, Default)]
struct PerContext {
    /// (context, name, data.value) of each reconcile.
    seen: Arc<parking_lot::Mutex<Vec<(String, String, String)>>>,
}

impl Reconcile for PerContext {
    type Error = kubeplex::Error;

    async fn reconcile(
        &self,
        object: Arc<ConfigMap>,
        cx: &Cx<kubeplex::ContextName>,
    ) -> Result<Action, Self::Error> {
        let name = object.metadata.name.clone().unwrap_or_default();
        let value = object.data.as_ref().and_then(|d| d.get("value")).cloned();
        let seen = (
            cx.cluster().name().to_owned(),
            name,
            value.unwrap_or_default(),
        );
        self.seen.lock().push(seen);
        Ok(Action::await_change())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sharded_by_context_each_context_is_reconciled_by_one_replica() {
    let env = env().await;
    let control = env.client("control").await.unwrap();
    create_namespace(&control, "by-context").await;
    for i in 0..3 {
        put_config_map(&control, "by-context", &format!("parent-{i}"), "1").await;
    }
    let mut kubeconfig = env.kubeconfig().clone();
    let original = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == "control")
        .unwrap()
        .clone();
    for alias in ALIASES {
        let mut named = original.clone();
        named.name = alias.to_owned();
        kubeconfig.contexts.push(named);
    }
    let mut replicas: Replicas = Vec::new();
    for identity in ["replica-a", "replica-b", "replica-c"] {
        let reconciler = PerContext::default();
        let sharding = Sharding::by_context(
            kubeplex::ContextName::new("ctx-0"),
            "by-context",
            "by-context",
        )
        .with_identity(identity)
        .lease_duration(Duration::from_secs(4))
        .renew_deadline(Duration::from_secs(3))
        .retry_period(Duration::from_millis(500));
        let running = Manager::with_kubeconfig(kubeconfig.clone())
            .probes("127.0.0.1:0")
            // The six contexts are one server, on purpose.
            .allow_duplicate_clusters()
            .sharding(sharding)
            .controller(reconciler.clone())
            .start()
            .await
            .unwrap();
        wait_started(&running, identity).await;
        replicas.push((identity, running, reconciler));
    }
    // The six contexts are the shards, split between the three replicas.
    let running: Vec<(&str, &kubeplex::Running)> =
        replicas.iter().map(|(n, r, _)| (*n, r)).collect();
    let held = split(&running, ALIASES.len()).await;
    let all: BTreeSet<&String> = held.values().flatten().collect();
    assert!(
        all.into_iter().eq(ALIASES.iter()),
        "the shards are not the contexts: {held:?}"
    );

    // Each replica watches the primaries of the contexts it holds, and of no other (memory scales out).
    watching_what_they_hold(&replicas, &held).await;
    // A change is reconciled in every context, each by the replica that holds the context's shard only.
    reconciled_by_holders(&control, &replicas, &held, "2").await;

    // replica-b leaves: the others take its contexts over, watch them, and reconcile there.
    let (_, b, _) = replicas.remove(1);
    crate::support::stop(b).await;
    let running: Vec<(&str, &kubeplex::Running)> =
        replicas.iter().map(|(n, r, _)| (*n, r)).collect();
    let after = split(&running, ALIASES.len()).await;
    watching_what_they_hold(&replicas, &after).await;
    reconciled_by_holders(&control, &replicas, &after, "3").await;
    for (_, running, _) in replicas {
        crate::support::stop(running).await;
    }
}

type Replicas = Vec<(&'static str, kubeplex::Running, PerContext)>;

/// The contexts where `running` has a watch open (`/readyz`).
async fn watched_contexts(running: &kubeplex::Running) -> BTreeSet<String> {
    let (_, body) = probe(running.probe_address().unwrap(), "/readyz").await;
    let contexts = body["clusters"].as_object().cloned().unwrap_or_default();
    contexts
        .into_iter()
        .filter(|(_, c)| c["watches"].as_array().is_some_and(|w| !w.is_empty()))
        .map(|(name, _)| name)
        .collect()
}

/// Waits until each replica watches the primaries of the contexts it holds, and of no other.
async fn watching_what_they_hold(replicas: &Replicas, held: &BTreeMap<String, BTreeSet<String>>) {
    let deadline = tokio::time::Instant::now() + WAIT;
    for (identity, running, _) in replicas {
        loop {
            let watched = watched_contexts(running).await;
            if watched == held[*identity] {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{identity} holds {:?} but watches {watched:?}",
                held[*identity]
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Sets every parent's value, then waits until it was reconciled in every context, each by the replica
/// that holds the context only, and once.
async fn reconciled_by_holders(
    control: &kube::Client,
    replicas: &Replicas,
    held: &BTreeMap<String, BTreeSet<String>>,
    value: &str,
) {
    for i in 0..3 {
        put_config_map(control, "by-context", &format!("parent-{i}"), value).await;
    }
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let reconciled: Vec<(&str, (String, String))> = replicas
            .iter()
            .flat_map(|(identity, _, r)| {
                let seen = r.seen.lock().clone();
                seen.into_iter()
                    .filter(|(_, _, v)| v == value)
                    .map(move |(context, name, _)| (*identity, (context, name)))
            })
            .collect();
        if reconciled.len() >= ALIASES.len() * 3 {
            for (identity, (context, name)) in &reconciled {
                assert!(
                    held[*identity].contains(context),
                    "{identity} reconciled {context}/{name} with {value} but holds {:?}",
                    held[*identity]
                );
            }
            let distinct: BTreeSet<&(String, String)> = reconciled.iter().map(|(_, p)| p).collect();
            assert_eq!(
                distinct.len(),
                reconciled.len(),
                "reconciled twice: {reconciled:?}"
            );
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not every context reconciled {value}: {reconciled:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
