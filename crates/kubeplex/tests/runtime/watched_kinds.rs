//! Kinds a controller neither reconciles nor owns, watched in a typed context and in every member: a
//! change of a watched object reconciles the parents its map function names (or every parent, without
//! one), with no polling, and the reconcile reads the watched objects from the cluster's cache.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::CustomResourceExt;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::runtime::reflector::ObjectRef;
use kubeplex::prelude::*;
use kubeplex::{Cluster, Manager, members::LeavePolicy, members::Members};
use kubeplex_testenv::{TestEnv, eventually};
use parking_lot::Mutex;

use crate::members::cluster_c;
use crate::spread::{Spread, create_spread};
use crate::support::{Fleet, WAIT, create_namespace, wait_started};

/// The suite's clusters, with the Spread kind installed in control.
async fn env() -> &'static TestEnv {
    crate::support::clusters([("control", Spread::crd())]).await
}

/// Where the watched ConfigMaps live, in cluster-a and in the member.
const WATCHED: &str = "watched-inputs";

/// The label naming the Spread a watched ConfigMap concerns.
const FOR: &str = "test.kubeplex.dev/for";

/// The Spread (in `watch-mapped`) a watched ConfigMap names in its label, if any.
fn spread_of(config: &ConfigMap, _: &Cluster<Fleet>, _gone: bool) -> Vec<ObjectRef<Spread>> {
    let labels = config.metadata.labels.as_ref();
    let name = labels.and_then(|l| l.get(FOR));
    name.map(|n| ObjectRef::new(n).within("watch-mapped"))
        .into_iter()
        .collect()
}

/// Records, at each reconcile, the watched ConfigMaps naming the parent in every cluster it works in.
#[controller(
    crd = Spread,
    contexts = [Fleet::Control],
    namespaces = ["watch-mapped"],
    watches(ConfigMap, contexts = [Fleet::ClusterA], members, namespaces = ["watched-inputs"], map = spread_of),
)]
struct Mapped {
    seen: Arc<Mutex<BTreeSet<String>>>,
}

impl Reconcile for Mapped {
    type Error = kubeplex::Error;

    async fn reconcile(&self, parent: Arc<Spread>, cx: &Cx<Fleet>) -> Result<Action, Self::Error> {
        let name = parent.metadata.name.clone().unwrap_or_default();
        let mut now = Vec::new();
        for (cluster, _) in cx.clusters() {
            // The control cluster holds the parents: ConfigMaps are watched in cluster-a and the members.
            if cluster == Fleet::Control {
                continue;
            }
            for config in cx.cached::<ConfigMap>(cluster.clone())? {
                let labels = config.metadata.labels.as_ref();
                if labels.and_then(|l| l.get(FOR)) == Some(&name) {
                    let config = config.metadata.name.clone().unwrap_or_default();
                    now.push(format!("{cluster}/{config}"));
                }
            }
        }
        now.sort();
        self.seen
            .lock()
            .insert(format!("{name}: [{}]", now.join(",")));
        Ok(Action::await_change())
    }
}

/// Records, at each reconcile, the Nodes cached in cluster-a.
#[controller(
    crd = Spread,
    contexts = [Fleet::Control],
    namespaces = ["watch-every"],
    watches(Node, contexts = [Fleet::ClusterA], label_selector = "test.kubeplex.dev/watched=every"),
)]
struct Every {
    seen: Arc<Mutex<BTreeSet<String>>>,
}

impl Reconcile for Every {
    type Error = kubeplex::Error;

    async fn reconcile(&self, parent: Arc<Spread>, cx: &Cx<Fleet>) -> Result<Action, Self::Error> {
        let name = parent.metadata.name.clone().unwrap_or_default();
        let mut nodes: Vec<String> = (cx.cached::<Node>(Fleet::ClusterA)?.iter())
            .map(|n| n.metadata.name.clone().unwrap_or_default())
            .collect();
        nodes.sort();
        self.seen
            .lock()
            .insert(format!("{name}: [{}]", nodes.join(",")));
        Ok(Action::await_change())
    }
}

/// A ConfigMap in `WATCHED` naming the Spread `spread`.
fn config(name: &str, spread: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([(FOR.to_owned(), spread.to_owned())].into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

/// Waits until a reconcile recorded `entry`.
async fn wait_seen(seen: &Mutex<BTreeSet<String>>, entry: &str) {
    eventually(format!("a reconcile that saw {entry}"), WAIT, async || {
        let seen = seen.lock();
        if seen.contains(entry) {
            Ok(())
        } else {
            Err(format!("{seen:#?}"))
        }
    })
    .await;
}

#[tokio::test]
async fn a_watched_change_in_a_context_or_a_member_reconciles_the_parents_its_map_names() {
    let env = env().await;
    for cluster in ["cluster-a", "cluster-c"] {
        create_namespace(&env.client(cluster).await.unwrap(), WATCHED).await;
    }
    create_spread(env, "watch-mapped", "one").await;
    create_spread(env, "watch-mapped", "two").await;
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let members = Members::new();
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Mapped { seen: seen.clone() })
        .members(members.clone(), LeavePolicy::Orphan)
        .start()
        .await
        .unwrap();
    wait_started(&running, "started").await;
    wait_seen(&seen, "one: []").await;
    wait_seen(&seen, "two: []").await;

    // Applied in a typed context: the parent it names is reconciled, and reads it from the cache.
    let in_a: Api<ConfigMap> = Api::namespaced(env.client("cluster-a").await.unwrap(), WATCHED);
    in_a.create(&PostParams::default(), &config("for-one", "one"))
        .await
        .unwrap();
    wait_seen(&seen, "one: [cluster-a/for-one]").await;

    // Joined: the member's objects are watched too.
    members.add("cluster-c", cluster_c(env).await).await;
    let in_c: Api<ConfigMap> = Api::namespaced(env.client("cluster-c").await.unwrap(), WATCHED);
    in_c.create(&PostParams::default(), &config("for-two", "two"))
        .await
        .unwrap();
    wait_seen(&seen, "two: [cluster-c/for-two]").await;

    // Deleted: the parent is reconciled again, and the cache no longer holds it.
    seen.lock().remove("one: []");
    in_a.delete("for-one", &DeleteParams::default())
        .await
        .unwrap();
    wait_seen(&seen, "one: []").await;
    // The other parent was never told of cluster-a's object.
    assert!(
        !seen.lock().iter().any(|s| s.starts_with("two: [cluster-a")),
        "{:#?}",
        seen.lock()
    );
    crate::support::stop(running).await;
}

#[tokio::test]
async fn a_watched_change_without_a_map_reconciles_every_parent() {
    let env = env().await;
    create_spread(env, "watch-every", "first").await;
    create_spread(env, "watch-every", "second").await;
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Every { seen: seen.clone() })
        .start()
        .await
        .unwrap();
    wait_started(&running, "started").await;
    wait_seen(&seen, "first: []").await;
    wait_seen(&seen, "second: []").await;

    let nodes: Api<Node> = Api::all(env.client("cluster-a").await.unwrap());
    let node = Node {
        metadata: ObjectMeta {
            name: Some("watched-node".into()),
            labels: Some([("test.kubeplex.dev/watched".to_owned(), "every".to_owned())].into()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    };
    nodes.create(&PostParams::default(), &node).await.unwrap();
    wait_seen(&seen, "first: [watched-node]").await;
    wait_seen(&seen, "second: [watched-node]").await;
    nodes
        .delete("watched-node", &DeleteParams::default())
        .await
        .unwrap();
    crate::support::stop(running).await;
}
