//! Per-child policies on real clusters: a child whose prune policy keeps it stays, unlinked, when the spec
//! no longer declares it (its sibling without the policy is pruned), and is taken back when declared
//! again; a child whose delete policy orphans it stays, unlinked, when its parent is deleted (its sibling
//! is deleted, and the parent goes). The status and Events say so.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::support::{create_namespace, polling, wait_started};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{CustomResource, CustomResourceExt, Resource, ResourceExt};
use kubeplex::{
    Action, ChildOptions, ClusterState, ContextName, Cx, FleetStatus, Manager, Reconcile,
    controller, ownership::CONTROLLER_LABEL, ownership::ON_DELETE_ANNOTATION,
    ownership::ON_PRUNE_ANNOTATION, ownership::PARENT_UID_LABEL,
};
use kubeplex_testenv::{TestEnv, eventually};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A team: in cluster-a, a Namespace named `spec.team`, and ConfigMaps in [`KIDS`].
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "policies.test.kubeplex.dev",
    version = "v1",
    kind = "Team",
    namespaced,
    status = "TeamStatus"
)]
pub struct TeamSpec {
    team: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct TeamStatus {
    #[serde(flatten)]
    fleet: FleetStatus,
}

/// The suite's clusters, with this module's kinds installed.
pub(crate) async fn env() -> &'static TestEnv {
    crate::support::clusters([("control", Team::crd())]).await
}

const CLUSTER_A: ContextName = ContextName::new("cluster-a");
/// Where the ConfigMap children live in cluster-a.
const KIDS: &str = "kids";

/// The team's Namespace is kept when the spec names another; its ConfigMap is not.
#[controller(
    crd = Team,
    contexts = ["control"],
    namespaces = ["keeps"],
    owns(Namespace, contexts = ["cluster-a"], prune = keep),
    owns(ConfigMap, contexts = ["cluster-a"], namespaces = ["kids"]),
)]
struct Keeps;

impl Reconcile for Keeps {
    type Error = kubeplex::Error;
    async fn reconcile(&self, team: Arc<Team>, cx: &Cx<ContextName>) -> kubeplex::Result<Action> {
        let name = &team.spec.team;
        cx.child(CLUSTER_A, namespace(name))?;
        cx.child(CLUSTER_A, config_map(name))?;
        Ok(Action::await_change())
    }
}

/// The team's Namespace is orphaned when the team is deleted (the kind's policy), and so is one of its
/// two ConfigMaps (that object's own).
#[controller(
    crd = Team,
    contexts = ["control"],
    namespaces = ["orphans"],
    owns(Namespace, contexts = ["cluster-a"], on_delete = orphan),
    owns(ConfigMap, contexts = ["cluster-a"], namespaces = ["kids"]),
)]
struct Orphans;

impl Reconcile for Orphans {
    type Error = kubeplex::Error;
    async fn reconcile(&self, team: Arc<Team>, cx: &Cx<ContextName>) -> kubeplex::Result<Action> {
        let name = &team.spec.team;
        cx.child(CLUSTER_A, namespace(name))?;
        let spared = ChildOptions::new().orphan_on_delete();
        cx.child_with(CLUSTER_A, config_map(&format!("{name}-spared")), spared)?;
        cx.child(CLUSTER_A, config_map(&format!("{name}-plain")))?;
        Ok(Action::await_change())
    }
}

fn namespace(name: &str) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    }
}

fn config_map(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(KIDS.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("team".to_owned(), name.to_owned())])),
        ..ConfigMap::default()
    }
}

/// Whether `object` carries a link to a parent (either link label).
fn linked<K: Resource>(object: &K) -> bool {
    let labels = object.meta().labels.clone().unwrap_or_default();
    labels.contains_key(CONTROLLER_LABEL) || labels.contains_key(PARENT_UID_LABEL)
}

/// Waits for `name` in `api` to exist and be linked (`true`) or unlinked (`false`); returns it.
async fn wait_linked<K>(api: &Api<K>, name: &str, link: bool) -> K
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let what = format!("{name} {}", if link { "linked" } else { "unlinked" });
    eventually(what, polling(), async || {
        match api.get_opt(name).await.unwrap() {
            Some(object) if linked(&object) == link => Ok(object),
            other => Err(format!("{:?}", other.map(|o| o.meta().labels.clone()))),
        }
    })
    .await
}

async fn wait_gone<K>(api: &Api<K>, name: &str, what: &str)
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(what, polling(), async || {
        match api.get_opt(name).await.unwrap() {
            None => Ok(()),
            Some(left) => Err(format!("still there: {:?}", left.meta().finalizers)),
        }
    })
    .await;
}

/// Waits for an Event of `reason` about the object of `uid` in `events`; returns its note.
async fn wait_event(events: &Api<Event>, uid: &Option<String>, reason: &str) -> String {
    eventually(format!("a {reason} event"), polling(), async || {
        let list = events.list(&ListParams::default()).await.unwrap().items;
        list.into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.uid.clone()) == *uid)
            .find(|e| e.reason.as_deref() == Some(reason))
            .and_then(|e| e.note)
    })
    .await
}

#[tokio::test]
async fn a_child_kept_on_prune_stays_unlinked_while_its_sibling_is_pruned_and_is_taken_back() {
    let env = env().await;
    let (control, cluster_a) = (
        env.client("control").await.unwrap(),
        env.client("cluster-a").await.unwrap(),
    );
    create_namespace(&cluster_a, KIDS).await;
    create_namespace(&control, "keeps").await;
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Keeps)
        .start()
        .await
        .unwrap();
    wait_started(&running, "keeps started").await;
    let teams: Api<Team> = Api::namespaced(control.clone(), "keeps");
    let blue = TeamSpec {
        team: "keep-blue".into(),
    };
    teams
        .create(&PostParams::default(), &Team::new("t", blue))
        .await
        .unwrap();
    let namespaces: Api<Namespace> = Api::all(cluster_a.clone());
    let kids: Api<ConfigMap> = Api::namespaced(cluster_a, KIDS);
    let first = wait_linked(&namespaces, "keep-blue", true).await;
    assert_eq!(first.annotations()[ON_PRUNE_ANNOTATION], "keep", "recorded");
    wait_linked(&kids, "keep-blue", true).await;

    let green = serde_json::json!({ "spec": { "team": "keep-green" } });
    teams
        .patch("t", &PatchParams::default(), &Patch::Merge(&green))
        .await
        .unwrap();
    wait_linked(&namespaces, "keep-green", true).await;
    wait_gone(
        &kids,
        "keep-blue",
        "the ConfigMap no longer declared pruned",
    )
    .await;
    let kept = wait_linked(&namespaces, "keep-blue", false).await;
    assert!(
        kept.metadata.deletion_timestamp.is_none(),
        "kept, not deleted"
    );
    assert_eq!(kept.uid(), first.uid(), "the same object");
    assert!(!kept.annotations().contains_key(ON_PRUNE_ANNOTATION));

    let told = "1 child kept (no longer declared; left in place, unlinked): Namespace keep-blue";
    let status = async || {
        let team = teams.get("t").await.unwrap();
        let fleet = team.status.map(|s| s.fleet).unwrap_or_default();
        match fleet.clusters.get("cluster-a") {
            Some(c) if c.state == ClusterState::Applied && c.message.as_deref() == Some(told) => {
                Ok(())
            }
            _ => Err(format!("{fleet:#?}")),
        }
    };
    eventually("the status naming the child kept", polling(), status).await;
    let uid = teams.get("t").await.unwrap().uid();
    let events: Api<Event> = Api::namespaced(control, "keeps");
    let note = wait_event(&events, &uid, "ChildrenKept").await;
    assert!(
        note.ends_with("in cluster-a: Namespace keep-blue"),
        "{note}"
    );
    let note = wait_event(&events, &uid, "ChildPruned").await;
    assert!(
        note.ends_with("in cluster-a: ConfigMap kids/keep-blue"),
        "{note}"
    );
    // Reconciled again meanwhile (the unlink is an event of the parent), it still says so and keeps it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    status().await.unwrap();
    wait_linked(&namespaces, "keep-blue", false).await;

    // Named again: taken back, and the other one kept in turn.
    let back = serde_json::json!({ "spec": { "team": "keep-blue" } });
    teams
        .patch("t", &PatchParams::default(), &Patch::Merge(&back))
        .await
        .unwrap();
    let again = wait_linked(&namespaces, "keep-blue", true).await;
    assert_eq!(again.uid(), first.uid());
    wait_linked(&namespaces, "keep-green", false).await;
    crate::support::stop(running).await;
}

#[tokio::test]
async fn children_orphaned_on_delete_stay_unlinked_while_their_sibling_and_the_parent_go() {
    let env = env().await;
    let (control, cluster_a) = (
        env.client("control").await.unwrap(),
        env.client("cluster-a").await.unwrap(),
    );
    create_namespace(&cluster_a, KIDS).await;
    create_namespace(&control, "orphans").await;
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Orphans)
        .start()
        .await
        .unwrap();
    wait_started(&running, "orphans started").await;
    let teams: Api<Team> = Api::namespaced(control.clone(), "orphans");
    let spec = TeamSpec {
        team: "orphan-red".into(),
    };
    teams
        .create(&PostParams::default(), &Team::new("o", spec))
        .await
        .unwrap();
    let namespaces: Api<Namespace> = Api::all(cluster_a.clone());
    let kids: Api<ConfigMap> = Api::namespaced(cluster_a, KIDS);
    let namespace = wait_linked(&namespaces, "orphan-red", true).await;
    assert_eq!(namespace.annotations()[ON_DELETE_ANNOTATION], "orphan");
    let spared = wait_linked(&kids, "orphan-red-spared", true).await;
    assert_eq!(spared.annotations()[ON_DELETE_ANNOTATION], "orphan");
    let plain = wait_linked(&kids, "orphan-red-plain", true).await;
    assert!(!plain.annotations().contains_key(ON_DELETE_ANNOTATION));
    let uid = teams.get("o").await.unwrap().uid();

    teams.delete("o", &DeleteParams::default()).await.unwrap();
    wait_gone(&teams, "o", "the parent gone").await;
    wait_gone(&kids, "orphan-red-plain", "the plain sibling deleted").await;
    for left in [
        wait_linked(&kids, "orphan-red-spared", false)
            .await
            .metadata,
        wait_linked(&namespaces, "orphan-red", false).await.metadata,
    ] {
        assert!(left.deletion_timestamp.is_none(), "{:?} deleted", left.name);
        let annotations = left.annotations.unwrap_or_default();
        assert!(!annotations.contains_key(ON_DELETE_ANNOTATION));
    }
    let events: Api<Event> = Api::namespaced(control, "orphans");
    let note = wait_event(&events, &uid, "ChildrenOrphaned").await;
    assert!(
        note.ends_with("in cluster-a: ConfigMap kids/orphan-red-spared, Namespace orphan-red"),
        "{note}"
    );
    crate::support::stop(running).await;
}
