//! Deletion on real clusters waits until the children are gone: a child that carries a finalizer of its
//! own holds its parent, `Deleting` naming it, until the finalizer goes; past `abandon_terminating_after`
//! the parent goes anyway, with a Warning event naming the child that stays.

use std::sync::Arc;
use std::time::Duration;

use crate::support::{create_namespace, polling, wait_started};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use kubeplex::{
    Action, ClusterState, ContextName, Cx, FleetStatus, Manager, Reconcile, controller,
};
use kubeplex_testenv::{TestEnv, eventually};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A parent with one ConfigMap child in cluster-a, named after it.
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "test.kubeplex.dev",
    version = "v1",
    kind = "Holder",
    namespaced,
    status = "HolderStatus"
)]
pub struct HolderSpec {}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct HolderStatus {
    #[serde(flatten)]
    fleet: FleetStatus,
}

/// The suite's clusters, with this module's kinds installed.
pub(crate) async fn env() -> &'static TestEnv {
    crate::support::clusters([("control", Holder::crd())]).await
}

const CLUSTER_A: ContextName = ContextName::new("cluster-a");
/// Where the children live in cluster-a.
const KIDS: &str = "held";
/// The finalizer the tests put on a child, as another controller would.
const HOLD: &str = "example.com/hold";

/// Waits for its children as long as they are there (the default).
#[controller(
    crd = Holder,
    contexts = ["control"],
    namespaces = ["waits"],
    owns(ConfigMap, contexts = ["cluster-a"], namespaces = ["held"]),
)]
struct Waits;

/// Stops waiting for children still there two seconds after the deletion.
#[controller(
    crd = Holder,
    contexts = ["control"],
    namespaces = ["bounded"],
    owns(ConfigMap, contexts = ["cluster-a"], namespaces = ["held"]),
    abandon_terminating_after = "2s",
)]
struct Bounded;

async fn declare_child(holder: &Holder, cx: &Cx<ContextName>) -> kubeplex::Result<Action> {
    let child = ConfigMap {
        metadata: ObjectMeta {
            name: Some(holder.name_any()),
            namespace: Some(KIDS.into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    cx.child(CLUSTER_A, child)?;
    Ok(Action::await_change())
}

impl Reconcile for Waits {
    type Error = kubeplex::Error;
    async fn reconcile(
        &self,
        holder: Arc<Holder>,
        cx: &Cx<ContextName>,
    ) -> kubeplex::Result<Action> {
        declare_child(&holder, cx).await
    }
}

impl Reconcile for Bounded {
    type Error = kubeplex::Error;
    async fn reconcile(
        &self,
        holder: Arc<Holder>,
        cx: &Cx<ContextName>,
    ) -> kubeplex::Result<Action> {
        declare_child(&holder, cx).await
    }
}

/// Creates the Holder `namespace/name`, waits for its child in cluster-a, and puts [`HOLD`] on the child.
async fn holder_with_held_child(env: &TestEnv, namespace: &str, name: &str) -> Api<ConfigMap> {
    let control = env.client("control").await.unwrap();
    create_namespace(&control, namespace).await;
    let holders: Api<Holder> = Api::namespaced(control, namespace);
    holders
        .create(&PostParams::default(), &Holder::new(name, HolderSpec {}))
        .await
        .unwrap();
    let kids: Api<ConfigMap> = Api::namespaced(env.client("cluster-a").await.unwrap(), KIDS);
    eventually(format!("{name}'s child"), polling(), async || {
        kids.get_opt(name).await.unwrap()
    })
    .await;
    let hold = serde_json::json!({ "metadata": { "finalizers": [HOLD] } });
    kids.patch(name, &PatchParams::default(), &Patch::Merge(&hold))
        .await
        .unwrap();
    kids
}

/// Takes [`HOLD`] off the child `name`, so that its deletion completes.
async fn release(kids: &Api<ConfigMap>, name: &str) {
    let released = serde_json::json!({ "metadata": { "finalizers": null } });
    kids.patch(name, &PatchParams::default(), &Patch::Merge(&released))
        .await
        .unwrap();
}

async fn wait_gone<K>(api: &Api<K>, name: &str, what: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(what, polling(), async || {
        match api.get_opt(name).await.unwrap() {
            None => Ok(()),
            Some(left) => Err(format!("still there: {:?}", left.meta().finalizers)),
        }
    })
    .await;
}

#[tokio::test]
async fn a_child_held_by_its_own_finalizer_holds_its_parent_until_it_is_gone() {
    let env = env().await;
    create_namespace(&env.client("cluster-a").await.unwrap(), KIDS).await;
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Waits)
        .start()
        .await
        .unwrap();
    wait_started(&running, "waits started").await;
    let kids = holder_with_held_child(env, "waits", "kept").await;
    let holders: Api<Holder> = Api::namespaced(env.client("control").await.unwrap(), "waits");
    holders
        .delete("kept", &DeleteParams::default())
        .await
        .unwrap();

    let waiting = "waiting for children to go: ConfigMap held/kept (Terminating; finalizers: example.com/hold)";
    eventually(
        "the parent Deleting, naming its child",
        polling(),
        async || {
            let holder = holders.get("kept").await.unwrap();
            let fleet = holder.status.map(|s| s.fleet).unwrap_or_default();
            let cluster = fleet.clusters.get("cluster-a");
            match cluster {
                Some(c)
                    if c.state == ClusterState::Deleting
                        && c.message.as_deref() == Some(waiting) =>
                {
                    Ok(())
                }
                _ => Err(format!("{fleet:#?}")),
            }
        },
    )
    .await;
    // Rechecked meanwhile (the child's own update, the requeue), it still waits.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let holder = holders.get("kept").await.unwrap();
    assert_eq!(holder.finalizers(), ["kubeplex.dev/waits"]);
    let ready = &holder.status.unwrap().fleet.conditions[0];
    assert_eq!(ready.reason, "DeletionBlocked", "{}", ready.message);

    release(&kids, "kept").await;
    wait_gone(&holders, "kept", "the parent gone once its child is").await;
    assert!(kids.get_opt("kept").await.unwrap().is_none());
    crate::support::stop(running).await;
}

#[tokio::test]
async fn past_abandon_terminating_after_the_parent_goes_with_an_event_naming_the_child_that_stays()
{
    let env = env().await;
    create_namespace(&env.client("cluster-a").await.unwrap(), KIDS).await;
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Bounded)
        .start()
        .await
        .unwrap();
    wait_started(&running, "bounded started").await;
    let kids = holder_with_held_child(env, "bounded", "let-go").await;
    let control = env.client("control").await.unwrap();
    let holders: Api<Holder> = Api::namespaced(control.clone(), "bounded");
    let uid = holders.get("let-go").await.unwrap().uid();
    holders
        .delete("let-go", &DeleteParams::default())
        .await
        .unwrap();

    wait_gone(&holders, "let-go", "the parent released past the bound").await;
    let events: Api<Event> = Api::namespaced(control, "bounded");
    let note = eventually("a ChildrenAbandoned event", polling(), async || {
        let list = events.list(&ListParams::default()).await.unwrap().items;
        list.into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.uid.clone()) == uid)
            .find(|e| e.reason.as_deref() == Some("ChildrenAbandoned"))
            .and_then(|e| e.note)
    })
    .await;
    assert!(
        note.starts_with("cluster-a: children still there longer than the abandon policy allows")
            && note.contains("ConfigMap held/let-go (Terminating; finalizers: example.com/hold)"),
        "{note}"
    );
    // The child stays, to finish on its own.
    let child = kids.get("let-go").await.unwrap();
    assert!(child.metadata.deletion_timestamp.is_some());
    release(&kids, "let-go").await;
    wait_gone(&kids, "let-go", "the child gone once released").await;
    crate::support::stop(running).await;
}
