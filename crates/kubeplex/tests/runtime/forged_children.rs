//! Forged children on real clusters: an object of a child kind that carries a real parent's UID label
//! but names another parent deletes none of the real parent's children, in any cluster, whether it is
//! there before the operator starts or made while it runs; and an object made in advance under a
//! child's name, with the parent's labels, is not adopted: the parent reports a conflict.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::support::logs::Logs;
use crate::support::{create_namespace, polling, wait_started, wait_status};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use kubeplex::{
    Action, Child, ClusterState, ContextName, Controller, Cx, FleetStatus, Manager, Plan,
    Reconcile, ownership::CONTROLLER_LABEL, ownership::PARENT_ANNOTATION,
    ownership::PARENT_KIND_ANNOTATION, ownership::PARENT_UID_LABEL,
};
use kubeplex_testenv::{TestEnv, eventually};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A parent whose spec names the Deployments it wants in `cluster-a` and `cluster-b`.
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "forged.test.kubeplex.dev",
    version = "v1",
    kind = "Holder",
    namespaced,
    status = "HolderStatus"
)]
pub struct HolderSpec {
    children: Vec<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct HolderStatus {
    #[serde(flatten)]
    fleet: FleetStatus,
}

/// The suite's clusters, with this module's kinds installed.
pub(crate) async fn env() -> &'static TestEnv {
    crate::support::clusters([("control", Holder::crd())]).await
}

const CONTROL: ContextName = ContextName::new("control");
const CLUSTER_A: ContextName = ContextName::new("cluster-a");
const CLUSTER_B: ContextName = ContextName::new("cluster-b");
/// The parent's kind, as its children's annotation names it.
const HOLDER_KIND: &str = "Holder.forged.test.kubeplex.dev/v1";
/// What the operator logs about a child whose parent reference conflicts.
const CONFLICT_LOGGED: &str = "a child's parent reference conflicts";

/// A controller of Holders in `control`/`$namespace`, with Deployment children in `cluster-a` and
/// `cluster-b`, namespace `$namespace`.
macro_rules! holder_controller {
    ($name:ident, $controller:literal, $namespace:literal) => {
        #[derive(Clone, Default)]
        struct $name;

        impl Controller for $name {
            type Resource = Holder;
            type Context = ContextName;
            fn plan() -> Plan<ContextName> {
                Plan::new($controller)
                    .with_contexts([CONTROL])
                    .with_namespaces([$namespace])
                    .owns(
                        Child::of::<Deployment>()
                            .with_contexts([CLUSTER_A, CLUSTER_B])
                            .with_namespaces([$namespace]),
                    )
            }
        }

        impl Reconcile for $name {
            type Error = kubeplex::Error;

            async fn reconcile(
                &self,
                holder: Arc<Holder>,
                cx: &Cx<ContextName>,
            ) -> Result<Action, kubeplex::Error> {
                for name in &holder.spec.children {
                    for cluster in [CLUSTER_A, CLUSTER_B] {
                        cx.child(cluster, deployment($namespace, name, BTreeMap::new()))?;
                    }
                }
                Ok(Action::await_change())
            }
        }
    };
}

holder_controller!(Live, "forged-live", "forged-live");
holder_controller!(Before, "forged-before", "forged-before");
holder_controller!(Premade, "forged-premade", "forged-premade");

/// A Deployment `name` in `namespace`, with `annotations`.
fn deployment(namespace: &str, name: &str, annotations: BTreeMap<String, String>) -> Deployment {
    let labels = BTreeMap::from([("app".to_owned(), name.to_owned())]);
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: DeploymentSpec {
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "app".into(),
                        image: Some("registry.invalid/app:1".into()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        },
        ..Deployment::default()
    }
}

/// A Deployment `name` in `namespace` made by hand with `controller`'s label and `uid` as its parent's,
/// naming `parent` (in `control`/`namespace`) as its parent, and an annotation of its own.
fn forged(namespace: &str, name: &str, controller: &str, uid: &str, parent: &str) -> Deployment {
    let annotations = BTreeMap::from([
        (
            PARENT_ANNOTATION.to_owned(),
            format!("control/{namespace}/{parent}"),
        ),
        (PARENT_KIND_ANNOTATION.to_owned(), HOLDER_KIND.to_owned()),
        ("example.com/made-by".to_owned(), "hand".to_owned()),
    ]);
    let mut forged = deployment(namespace, name, annotations);
    forged.metadata.labels = Some(BTreeMap::from([
        (CONTROLLER_LABEL.to_owned(), controller.to_owned()),
        (PARENT_UID_LABEL.to_owned(), uid.to_owned()),
    ]));
    forged
}

/// The Deployments of the parent with this UID in `cluster`/`namespace` (listed from the API server), by
/// name, with their UIDs.
async fn children(
    env: &TestEnv,
    cluster: &str,
    namespace: &str,
    uid: &str,
) -> BTreeMap<String, String> {
    let api: Api<Deployment> = Api::namespaced(env.client(cluster).await.unwrap(), namespace);
    let selector = format!("{PARENT_UID_LABEL}={uid}");
    let selector = ListParams::default().labels(&selector);
    let list = api.list_metadata(&selector).await.unwrap();
    (list.items.iter())
        .filter(|d| d.metadata.deletion_timestamp.is_none())
        .map(|d| (d.name_any(), d.uid().unwrap_or_default()))
        .collect()
}

/// Creates the Holder `name` in `namespace` wanting `wanted` (in both clusters), and waits until those
/// children exist: the parent, and its children's UIDs in `cluster-a` and `cluster-b`.
async fn create_holder(
    env: &TestEnv,
    namespace: &str,
    name: &str,
    wanted: &[&str],
) -> (Holder, [BTreeMap<String, String>; 2]) {
    let holders: Api<Holder> = Api::namespaced(env.client("control").await.unwrap(), namespace);
    let spec = HolderSpec {
        children: wanted.iter().map(|w| (*w).to_owned()).collect(),
    };
    let holder = holders
        .create(&PostParams::default(), &Holder::new(name, spec))
        .await
        .unwrap();
    let uid = holder.uid().unwrap();
    let found = eventually(format!("{name}'s children"), polling(), async || {
        let a = children(env, "cluster-a", namespace, &uid).await;
        let b = children(env, "cluster-b", namespace, &uid).await;
        let all = |found: &BTreeMap<String, String>| {
            found.len() == wanted.len() && wanted.iter().all(|w| found.contains_key(*w))
        };
        (all(&a) && all(&b)).then_some([a, b])
    })
    .await;
    (holder, found)
}

async fn setup(env: &TestEnv, namespace: &str) {
    for cluster in ["control", "cluster-a", "cluster-b"] {
        create_namespace(&env.client(cluster).await.unwrap(), namespace).await;
    }
}

/// The real children of the parent with this UID in `cluster-a` and `cluster-b` (the object `forged` left
/// out), by name, with their UIDs.
async fn real_children(env: &TestEnv, namespace: &str, uid: &str) -> [BTreeMap<String, String>; 2] {
    let mut a = children(env, "cluster-a", namespace, uid).await;
    let mut b = children(env, "cluster-b", namespace, uid).await;
    a.remove("forged");
    b.remove("forged");
    [a, b]
}

/// Whether a `ChildConflict` Event on the parent `real` in `namespace` of control was told.
async fn conflict_told(env: &TestEnv, namespace: &str) -> bool {
    let events: Api<Event> = Api::namespaced(env.client("control").await.unwrap(), namespace);
    let list = events.list(&ListParams::default()).await.unwrap();
    list.items.into_iter().any(|e| {
        e.reason.as_deref() == Some("ChildConflict")
            && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("real")
    })
}

/// Waits until the operator has judged the object `forged` in `namespace` — it logged its conflict or told
/// the real parent — or a real child of the parent with this UID changed (`before`: as they were); then
/// asserts that they are all there still, with their UIDs.
async fn assert_judged_and_untouched(
    env: &TestEnv,
    logs: &Logs,
    namespace: &str,
    uid: &str,
    before: &[BTreeMap<String, String>; 2],
) {
    let object = format!("{namespace}/forged");
    eventually("the forged child judged", polling(), async || {
        let text = logs.text();
        let mut lines = text.lines();
        let reported = lines.any(|l| l.contains(CONFLICT_LOGGED) && l.contains(&object));
        let judged = reported || conflict_told(env, namespace).await;
        (judged || real_children(env, namespace, uid).await != *before).then_some(())
    })
    .await;
    let now = real_children(env, namespace, uid).await;
    assert_eq!(
        &now, before,
        "the real children in cluster-a and cluster-b, with their UIDs"
    );
}

#[tokio::test]
async fn a_forged_child_naming_an_absent_parent_deletes_none_of_the_real_parents_children() {
    let env = env().await;
    setup(env, "forged-live").await;
    let (logs, _logging) = Logs::capture(tracing::Level::WARN);
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Live)
        .start()
        .await
        .unwrap();
    wait_started(&running, "forged-live started").await;
    let (real, before) = create_holder(env, "forged-live", "real", &["web", "db"]).await;
    let uid = real.uid().unwrap();

    let cluster_a = env.client("cluster-a").await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(cluster_a, "forged-live");
    let forged = forged("forged-live", "forged", "forged-live", &uid, "ghost");
    let forged = deployments
        .create(&PostParams::default(), &forged)
        .await
        .unwrap();
    assert_judged_and_untouched(env, &logs, "forged-live", &uid, &before).await;
    let still = deployments.get("forged").await.unwrap();
    assert_eq!(
        still.uid(),
        forged.uid(),
        "the forged object is left alone too"
    );

    // The real parent is told, with an Event.
    let events: Api<Event> = Api::namespaced(env.client("control").await.unwrap(), "forged-live");
    eventually(
        "a ChildConflict Event on the real parent",
        polling(),
        async || {
            let list = events.list(&ListParams::default()).await.unwrap();
            list.items.into_iter().find(|e| {
                e.reason.as_deref() == Some("ChildConflict")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("real")
            })
        },
    )
    .await;
    crate::support::stop(running).await;
}

#[tokio::test]
async fn a_forged_child_there_before_the_operator_starts_deletes_none_of_the_real_parents_children()
{
    let env = env().await;
    setup(env, "forged-before").await;
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Before)
        .start()
        .await
        .unwrap();
    wait_started(&running, "forged-before started").await;
    let (real, before) = create_holder(env, "forged-before", "real", &["web", "db"]).await;
    let uid = real.uid().unwrap();
    crate::support::stop(running).await;

    let cluster_a = env.client("cluster-a").await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(cluster_a, "forged-before");
    let forged = forged("forged-before", "forged", "forged-before", &uid, "ghost");
    deployments
        .create(&PostParams::default(), &forged)
        .await
        .unwrap();

    let (logs, _logging) = Logs::capture(tracing::Level::WARN);
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Before)
        .start()
        .await
        .unwrap();
    wait_started(&running, "forged-before started again").await;
    assert_judged_and_untouched(env, &logs, "forged-before", &uid, &before).await;
    crate::support::stop(running).await;
}

#[tokio::test]
async fn an_object_made_in_advance_with_a_parents_labels_is_not_adopted() {
    let env = env().await;
    setup(env, "forged-premade").await;
    // The parent wants `web` in both clusters; before the operator runs, `web` is made in cluster-a under
    // the child's name, naming the parent in full, with a field of its own.
    let holders: Api<Holder> =
        Api::namespaced(env.client("control").await.unwrap(), "forged-premade");
    let spec = HolderSpec {
        children: vec!["web".into()],
    };
    let holder = holders
        .create(&PostParams::default(), &Holder::new("wants", spec))
        .await
        .unwrap();
    let uid = holder.uid().unwrap();
    let cluster_a = env.client("cluster-a").await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(cluster_a, "forged-premade");
    let made = forged("forged-premade", "web", "forged-premade", &uid, "wants");
    let made = deployments
        .create(&PostParams::default(), &made)
        .await
        .unwrap();

    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Premade)
        .start()
        .await
        .unwrap();
    wait_started(&running, "forged-premade started").await;
    let conflict = |h: &Holder| {
        let status = h.status.as_ref().map(|s| &s.fleet);
        let a = status.and_then(|s| s.clusters.get("cluster-a"));
        let b = status.and_then(|s| s.clusters.get("cluster-b"));
        a.is_some_and(|a| a.state == ClusterState::Conflict)
            && b.is_some_and(|b| b.state == ClusterState::Applied)
    };
    let holder = wait_status(&holders, "wants", "a conflict in cluster-a", conflict).await;
    let message = holder.status.unwrap().fleet.clusters["cluster-a"]
        .message
        .clone()
        .unwrap_or_default();
    assert!(
        message.contains("Deployment forged-premade/web already exists and belongs to someone else (it names this parent, but forged-premade is not among its field managers)"),
        "{message}"
    );
    let now = deployments.get("web").await.unwrap();
    assert_eq!(
        now.resource_version(),
        made.resource_version(),
        "the object made in advance is unchanged"
    );
    crate::support::stop(running).await;
}
