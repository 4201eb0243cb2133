//! Children in other clusters: their watches, applying and pruning them, removing them when the parent goes.

use std::any::TypeId;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams,
    Preconditions,
};

use crate::controller::PrimaryResource;
use crate::health::chain;
use crate::ownership::{CONTROLLER_LABEL, PARENT_UID_LABEL, ParentRef};
use crate::status::{ClusterState, Outcome};
use crate::watches::{Change, SharedWatch, WatchKey, WatchRegistry, receiver_stream};

/// Opens the shared watch of one child kind in one (context, namespace), for one controller's children.
pub(crate) type OpenChildWatch = fn(
    registry: &WatchRegistry,
    context: &str,
    namespace: Option<&str>,
    controller: &str,
    client: Client,
) -> Arc<dyn ChildCache>;

/// A child kind's watch, seen through its metadata only (the runtime needs no more to link and prune).
pub(crate) trait ChildCache: Send + Sync {
    /// The metadata of every changed child from now on, preceded by the cached ones.
    fn changes(&self) -> BoxStream<'static, ObjectMeta>;
    /// The metadata of every cached child.
    fn cached(&self) -> Vec<ObjectMeta>;
    /// Resolves once the initial list is in the cache.
    fn ready(&self) -> BoxFuture<'static, ()>;
}

impl<K: PrimaryResource> ChildCache for SharedWatch<K> {
    fn changes(&self) -> BoxStream<'static, ObjectMeta> {
        receiver_stream(self.subscribe())
            .map(|change| match change {
                Change::Applied(child) | Change::Deleted(child) => child.meta().clone(),
            })
            .boxed()
    }

    fn cached(&self) -> Vec<ObjectMeta> {
        self.store()
            .state()
            .iter()
            .map(|child| child.meta().clone())
            .collect()
    }

    fn ready(&self) -> BoxFuture<'static, ()> {
        let store = self.store().clone();
        async move {
            let _ = store.wait_until_ready().await;
        }
        .boxed()
    }
}

/// Children are watched only where this controller put them: the label selector keeps other objects of
/// the kind out of the cache.
pub(crate) fn open_child_watch<K: PrimaryResource>(
    registry: &WatchRegistry,
    context: &str,
    namespace: Option<&str>,
    controller: &str,
    client: Client,
) -> Arc<dyn ChildCache> {
    let key = WatchKey {
        context: context.to_owned(),
        kind: TypeId::of::<K>(),
        namespace: namespace.map(str::to_owned),
        label_selector: Some(format!("{CONTROLLER_LABEL}={controller}")),
        field_selector: None,
    };
    registry.watch::<K>(key, client)
}

/// One child kind's cache in one (context, namespace).
#[derive(Clone)]
pub(crate) struct ChildWatch {
    pub(crate) context: String,
    pub(crate) resource: ApiResource,
    pub(crate) cache: Arc<dyn ChildCache>,
}

/// A child the reconcile asked for, not yet applied.
#[derive(Clone, Debug)]
pub(crate) struct DesiredChild {
    pub(crate) context: String,
    pub(crate) resource: ApiResource,
    pub(crate) namespace: Option<String>,
    pub(crate) name: String,
    pub(crate) object: serde_json::Value,
}

/// What linking needs to know of the parent and its controller.
pub(crate) struct Parentage<'a> {
    pub(crate) parent: &'a ParentRef,
    pub(crate) controller: &'a str,
    pub(crate) parent_kind: &'a str,
}

fn api(client: Client, resource: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace {
        Some(namespace) => Api::namespaced_with(client, namespace, resource),
        None => Api::all_with(client, resource),
    }
}

/// An outcome for a failed request: unreachable when the server could not be reached, else failed.
fn failure(context: &str, error: &kube::Error, what: &str) -> Outcome {
    let state = match error {
        kube::Error::HyperError(_) | kube::Error::Service(_) => ClusterState::Unreachable,
        _ => ClusterState::Failed,
    };
    let message = format!("context {context}: {what}: {}", chain(error));
    Outcome {
        state,
        children: 0,
        message: Some(message),
    }
}

/// Applies the desired children of one context (server-side apply, the controller as field manager) and
/// deletes the parent's children there that are no longer desired.
pub(crate) async fn sync_context(
    context: &str,
    client: Client,
    desired: Vec<DesiredChild>,
    watches: &[ChildWatch],
    link: &Parentage<'_>,
) -> Outcome {
    let (labels, annotations) = link.parent.stamp(link.controller, link.parent_kind);
    let apply = PatchParams::apply(link.controller).force();
    for child in &desired {
        let mut object = child.object.clone();
        let metadata = &mut object["metadata"];
        for (field, stamp) in [("labels", &labels), ("annotations", &annotations)] {
            for (key, value) in stamp {
                metadata[field][key] = serde_json::Value::String(value.clone());
            }
        }
        let api = api(client.clone(), &child.resource, child.namespace.as_deref());
        if let Err(error) = api.patch(&child.name, &apply, &Patch::Apply(&object)).await {
            let what = format!("applying {} {}", child.resource.kind, child.name);
            return failure(context, &error, &what);
        }
    }
    for watch in watches {
        for stale in watch.cache.cached().into_iter().filter(|meta| {
            is_child_of(meta, &link.parent.uid)
                && !desired.iter().any(|d| {
                    d.resource == watch.resource
                        && d.namespace == meta.namespace
                        && Some(&d.name) == meta.name.as_ref()
                })
        }) {
            let name = stale.name.clone().unwrap_or_default();
            tracing::info!(%context, kind = %watch.resource.kind, %name, "deleting a child no longer desired");
            if let Err(error) = delete(client.clone(), &watch.resource, &stale).await {
                return failure(
                    context,
                    &error,
                    &format!("deleting {} {name}", watch.resource.kind),
                );
            }
        }
    }
    Outcome {
        state: ClusterState::Ready,
        children: desired.len() as u32,
        message: None,
    }
}

/// Deletes every child of the parent in one context, found by listing (not the cache, which may lag):
/// `Ready` with no children left, or why not.
pub(crate) async fn remove_children(
    context: &str,
    client: Client,
    targets: &[(ApiResource, Option<String>)],
    parent_uid: &str,
) -> Outcome {
    let selector = ListParams::default().labels(&format!("{PARENT_UID_LABEL}={parent_uid}"));
    for (resource, namespace) in targets {
        let children = match api(client.clone(), resource, namespace.as_deref())
            .list(&selector)
            .await
        {
            Ok(list) => list.items,
            Err(error) => return failure(context, &error, &format!("listing {}", resource.plural)),
        };
        for child in children {
            let name = child.metadata.name.clone().unwrap_or_default();
            tracing::info!(%context, kind = %resource.kind, %name, "deleting a child of a deleted parent");
            if let Err(error) = delete(client.clone(), resource, &child.metadata).await {
                return failure(
                    context,
                    &error,
                    &format!("deleting {} {name}", resource.kind),
                );
            }
        }
    }
    Outcome {
        state: ClusterState::Ready,
        children: 0,
        message: None,
    }
}

/// Deletes a child, only if it is still the object we saw (same UID); already gone counts as done.
pub(crate) async fn delete(
    client: Client,
    resource: &ApiResource,
    child: &ObjectMeta,
) -> Result<(), kube::Error> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: child.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    let api = api(client, resource, child.namespace.as_deref());
    match api
        .delete(child.name.as_deref().unwrap_or_default(), &params)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
        Err(error) => Err(error),
    }
}

/// Whether `meta` is a child of the parent with this UID.
pub(crate) fn is_child_of(meta: &ObjectMeta, parent_uid: &str) -> bool {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(PARENT_UID_LABEL))
        .is_some_and(|uid| uid == parent_uid)
}
