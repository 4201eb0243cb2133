//! The deletion path on real clusters: `Reconcile::cleanup` runs once per deleted parent, while its children
//! still exist; a controller without a declared finalizer keeps `kubeplex.dev/<name>` on its parents; and a
//! delete carries the child's UID as a precondition, so a same-name object created since is left alone; and
//! a child of a deleted parent that comes back (a late apply of a replica that lost the Lease) is removed.

use std::sync::Arc;
use std::time::Duration;

use crate::support::{WAIT, create_namespace, wait_started};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams, Preconditions};
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use kubeplex::{
    Action, Child, ContextName, Controller, Cx, FleetStatus, Manager, Plan, Reconcile,
    ownership::PARENT_UID_LABEL,
};
use kubeplex_testenv::TestEnv;
use parking_lot::Mutex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A parent whose spec names the ConfigMaps it wants in `cluster-a`.
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "test.kubeplex.dev",
    version = "v1",
    kind = "Owner",
    namespaced,
    status = "OwnerStatus"
)]
pub struct OwnerSpec {
    children: Vec<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct OwnerStatus {
    #[serde(flatten)]
    fleet: FleetStatus,
}

/// The suite's clusters, with this module's kinds installed.
pub(crate) async fn env() -> &'static TestEnv {
    crate::support::clusters([("control", Owner::crd())]).await
}

const CONTROL: ContextName = ContextName::new("control");
const CLUSTER_A: ContextName = ContextName::new("cluster-a");
/// Where the children live in cluster-a.
const KIDS: &str = "cleanup-kids";

/// One call of `cleanup` as the reconciler saw it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Call {
    parent: String,
    /// The parent's children in cluster-a at the time of the call, by name.
    children: Vec<String>,
}

#[derive(Clone, Default)]
struct Calls(Arc<Mutex<Vec<Call>>>);

impl Calls {
    fn all(&self) -> Vec<Call> {
        let mut calls = self.0.lock().clone();
        calls.sort();
        calls
    }
}

/// A controller of Owners in `control`/`$namespace` with ConfigMap children in `cluster-a`/[`KIDS`], and
/// no declared finalizer; its `cleanup` records each call with the children it finds.
macro_rules! cleaner {
    ($name:ident, $controller:literal, $namespace:literal) => {
        #[derive(Clone, Default)]
        struct $name(Calls);

        impl Controller for $name {
            type Resource = Owner;
            type Context = ContextName;
            fn plan() -> Plan<ContextName> {
                Plan::new($controller)
                    .with_contexts([CONTROL])
                    .with_namespaces([$namespace])
                    .owns(
                        Child::of::<ConfigMap>()
                            .with_contexts([CLUSTER_A])
                            .with_namespaces([KIDS]),
                    )
            }
        }

        impl Reconcile for $name {
            type Error = kubeplex::Error;

            async fn reconcile(
                &self,
                owner: Arc<Owner>,
                cx: &Cx<ContextName>,
            ) -> Result<Action, kubeplex::Error> {
                declare_children(&owner, cx)?;
                Ok(Action::await_change())
            }

            async fn cleanup(
                &self,
                owner: Arc<Owner>,
                cx: &Cx<ContextName>,
            ) -> Result<(), kubeplex::Error> {
                let children = children_of(cx.client(CLUSTER_A)?, &owner).await;
                let call = Call {
                    parent: owner.name_any(),
                    children,
                };
                self.0.0.lock().push(call);
                Ok(())
            }
        }
    };
}

cleaner!(Cleaner, "cleaner", "cleanup");
cleaner!(Defaults, "defaults", "cleanup-defaults");
cleaner!(Late, "late", "cleanup-late");

fn declare_children(owner: &Owner, cx: &Cx<ContextName>) -> kubeplex::Result<()> {
    for name in &owner.spec.children {
        let child = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(KIDS.into()),
                ..ObjectMeta::default()
            },
            data: Some([("owner".to_owned(), owner.name_any())].into()),
            ..ConfigMap::default()
        };
        cx.child(CLUSTER_A, child)?;
    }
    Ok(())
}

/// The names of `owner`'s children in cluster-a (listed from the API server, not a cache), sorted.
async fn children_of(cluster_a: kube::Client, owner: &Owner) -> Vec<String> {
    let kids: Api<ConfigMap> = Api::namespaced(cluster_a, KIDS);
    let selector = format!("{PARENT_UID_LABEL}={}", owner.uid().unwrap_or_default());
    let mut names: Vec<String> = kids
        .list_metadata(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .map(ResourceExt::name_any)
        .collect();
    names.sort();
    names
}

/// Polls `check` until it returns `Ok`; panics with its last complaint after [`WAIT`].
async fn eventually(what: &str, check: impl AsyncFnMut() -> Result<(), String>) {
    kubeplex_testenv::eventually(what, WAIT, check).await;
}

/// Creates the Owner `name` in `namespace` wanting `children`, and waits until they all exist.
async fn create_owner(env: &TestEnv, namespace: &str, name: &str, children: &[String]) -> Owner {
    let owners: Api<Owner> = Api::namespaced(env.client("control").await.unwrap(), namespace);
    let spec = OwnerSpec {
        children: children.to_vec(),
    };
    let owner = owners
        .create(&PostParams::default(), &Owner::new(name, spec))
        .await
        .unwrap();
    let cluster_a = env.client("cluster-a").await.unwrap();
    eventually(&format!("{name}'s children"), || async {
        let found = children_of(cluster_a.clone(), &owner).await;
        (found == children)
            .then_some(())
            .ok_or(format!("{found:?}"))
    })
    .await;
    owner
}

async fn setup(env: &TestEnv, namespace: &str) {
    create_namespace(&env.client("control").await.unwrap(), namespace).await;
    create_namespace(&env.client("cluster-a").await.unwrap(), KIDS).await;
}

#[tokio::test]
async fn cleanup_runs_once_per_deleted_parent_while_its_children_still_exist() {
    let env = env().await;
    setup(env, "cleanup").await;
    let cleaner = Cleaner::default();
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(cleaner.clone())
        .start()
        .await
        .unwrap();
    wait_started(&running, "cleaner started").await;
    let names = ["first", "second", "third"];
    let mut owners = Vec::new();
    for name in names {
        let children = [format!("{name}-one"), format!("{name}-two")];
        owners.push(create_owner(env, "cleanup", name, &children).await);
    }
    assert_eq!(cleaner.0.all(), [], "no cleanup before a deletion");

    let api: Api<Owner> = Api::namespaced(env.client("control").await.unwrap(), "cleanup");
    for name in names {
        api.delete(name, &DeleteParams::default()).await.unwrap();
    }
    let cluster_a = env.client("cluster-a").await.unwrap();
    eventually("the owners and their children gone", || async {
        for owner in &owners {
            if api.get_opt(&owner.name_any()).await.unwrap().is_some() {
                return Err(format!("{} is still there", owner.name_any()));
            }
            let left = children_of(cluster_a.clone(), owner).await;
            if !left.is_empty() {
                return Err(format!("children left: {left:?}"));
            }
        }
        Ok(())
    })
    .await;
    // Each child's deletion is an event of its parent: any reconcile of a parent already finalized would
    // come within moments of the last one; give it two seconds to show.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let expected: Vec<Call> = names
        .iter()
        .map(|name| Call {
            parent: (*name).to_owned(),
            children: vec![format!("{name}-one"), format!("{name}-two")],
        })
        .collect();
    let mut expected = expected;
    expected.sort();
    assert_eq!(
        cleaner.0.all(),
        expected,
        "one cleanup per deleted parent, each before its children were removed"
    );
    tokio::time::timeout(WAIT, running.shutdown())
        .await
        .expect("shut down in time");
}

#[tokio::test]
async fn a_controller_without_a_declared_finalizer_keeps_kubeplex_dev_slash_its_name() {
    let env = env().await;
    setup(env, "cleanup-defaults").await;
    let defaults = Defaults::default();
    assert_eq!(Defaults::plan().finalizer(), None, "none declared");
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(defaults.clone())
        .start()
        .await
        .unwrap();
    wait_started(&running, "defaults started").await;
    let owner = create_owner(
        env,
        "cleanup-defaults",
        "plain",
        &["plain-child".to_owned()],
    )
    .await;
    let api: Api<Owner> = Api::namespaced(env.client("control").await.unwrap(), "cleanup-defaults");
    let kept = api.get("plain").await.unwrap();
    assert_eq!(kept.finalizers(), ["kubeplex.dev/defaults"]);

    // The finalizer holds the parent until cleanup ran and the children are gone, then goes.
    api.delete("plain", &DeleteParams::default()).await.unwrap();
    let cluster_a = env.client("cluster-a").await.unwrap();
    eventually("the parent gone", || async {
        match api.get_opt("plain").await.unwrap() {
            None => Ok(()),
            Some(left) => Err(format!("finalizers {:?}", left.finalizers())),
        }
    })
    .await;
    assert_eq!(children_of(cluster_a, &owner).await, Vec::<String>::new());
    assert_eq!(
        defaults.0.all(),
        [Call {
            parent: "plain".into(),
            children: vec!["plain-child".into()],
        }]
    );
    tokio::time::timeout(WAIT, running.shutdown())
        .await
        .expect("shut down in time");
}

/// What the runtime's deletes rely on (`children_tests.rs` replays the race against a stand-in server with
/// this answer): a delete that names the UID it saw does not delete a same-name object created since, and
/// is answered 409.
#[tokio::test]
async fn a_delete_with_a_stale_uid_leaves_a_recreated_object_alone() {
    let env = env().await;
    let cluster_a = env.client("cluster-a").await.unwrap();
    create_namespace(&cluster_a, "cleanup-uids").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster_a, "cleanup-uids");
    let object = ConfigMap {
        metadata: ObjectMeta {
            name: Some("recreated".into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    let seen = api.create(&PostParams::default(), &object).await.unwrap();
    api.delete("recreated", &DeleteParams::default())
        .await
        .unwrap();
    let again = api.create(&PostParams::default(), &object).await.unwrap();
    assert_ne!(seen.uid(), again.uid());
    let stale = DeleteParams {
        preconditions: Some(Preconditions {
            uid: seen.uid(),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    let error = api.delete("recreated", &stale).await.unwrap_err();
    let kube::Error::Api(status) = error else {
        panic!("expected an API error, got {error}")
    };
    assert_eq!(status.code, 409, "{status:?}");
    assert!(
        status.message.contains("does not match the UID in record"),
        "{}",
        status.message
    );
    assert_eq!(api.get("recreated").await.unwrap().uid(), again.uid());
}

/// A replica frozen while applying can send its apply after its successor deleted the parent and its
/// children (docs/ha.md): the child comes back, linked to a parent that is gone. The running operator
/// removes it on its event, and leaves a living parent's child alone.
#[tokio::test]
async fn a_child_that_comes_back_for_a_deleted_parent_is_removed() {
    let env = env().await;
    setup(env, "cleanup-late").await;
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Late::default())
        .start()
        .await
        .unwrap();
    wait_started(&running, "late started").await;
    let gone = create_owner(env, "cleanup-late", "gone", &["gone-child".to_owned()]).await;
    let kept = create_owner(env, "cleanup-late", "kept", &["kept-child".to_owned()]).await;
    let cluster_a = env.client("cluster-a").await.unwrap();
    let kids: Api<ConfigMap> = Api::namespaced(cluster_a.clone(), KIDS);
    let applied = kids.get("gone-child").await.unwrap();

    let owners: Api<Owner> = Api::namespaced(env.client("control").await.unwrap(), "cleanup-late");
    owners
        .delete("gone", &DeleteParams::default())
        .await
        .unwrap();
    eventually("gone and its child deleted", || async {
        let parent = owners.get_opt("gone").await.unwrap();
        let left = children_of(cluster_a.clone(), &gone).await;
        match (parent, left.is_empty()) {
            (None, true) => Ok(()),
            (_, _) => Err(format!("children left: {left:?}")),
        }
    })
    .await;

    // The late apply: the same object, link and field manager as the frozen replica's.
    let late = ConfigMap {
        metadata: ObjectMeta {
            name: applied.metadata.name.clone(),
            namespace: applied.metadata.namespace.clone(),
            labels: applied.metadata.labels.clone(),
            annotations: applied.metadata.annotations.clone(),
            ..ObjectMeta::default()
        },
        data: applied.data.clone(),
        ..ConfigMap::default()
    };
    kids.patch(
        "gone-child",
        &kube::api::PatchParams::apply("late").force(),
        &kube::api::Patch::Apply(&late),
    )
    .await
    .unwrap();
    eventually("the child that came back removed", || async {
        match kids.get_opt("gone-child").await.unwrap() {
            None => Ok(()),
            Some(child) if child.metadata.deletion_timestamp.is_some() => Ok(()),
            Some(_) => Err("gone-child is back and stays".to_owned()),
        }
    })
    .await;
    assert_eq!(
        children_of(cluster_a, &kept).await,
        ["kept-child"],
        "a living parent's child stays"
    );
    tokio::time::timeout(WAIT, running.shutdown())
        .await
        .expect("shut down in time");
}
