//! A child kind's shared watch, seen without its type: what syncing, pruning and the orphan sweep need.
//!
//! A plan names its child kinds by type, but the runtime handles them together; this is the type-erased view
//! of one child kind's cache in one (context, namespace), indexed by the parent's UID so that a reconcile
//! reads only its own parent's children.

use std::any::TypeId;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use kube::api::ObjectMeta;
use kube::core::PartialObjectMeta;
use kube::{Client, ResourceExt};

use super::watches::{SharedWatch, WatchKey, WatchRegistry};
use crate::core::{CONTROLLER_LABEL, PARENT_UID_LABEL, ParentRef};
use crate::core::{PrimaryResource, object_ref};

/// Opens the shared watch of one child kind in one (context, namespace), for one controller's children.
pub(crate) type OpenChildWatch = fn(
    registry: &WatchRegistry,
    context: &str,
    namespace: Option<&str>,
    controller: &str,
    client: Client,
) -> Arc<dyn ChildCache>;

/// Takes the parent of a changed child (into a queue, as a key); `false` once it takes no more.
pub(crate) type ParentSink = Box<dyn Fn(ParentRef) -> bool + Send + Sync>;

/// A child kind's cache, through the metadata the runtime needs to link, repair and prune.
pub(crate) trait ChildCache: Send + Sync {
    /// Hands `deliver` the parent of every changed child from now on, preceded by those of the cached
    /// ones, until it returns `false` (see [`SharedWatch::subscribe`]).
    fn subscribe_parents(&self, deliver: ParentSink);
    /// The cached children of the parent with this UID.
    fn children_of(&self, parent_uid: &str) -> Vec<ObjectMeta>;
    /// The cached child called `name` in `namespace`, whoever its parent.
    fn get(&self, namespace: Option<&str>, name: &str) -> Option<ObjectMeta>;
    /// The UID of every parent with children in the cache.
    fn parent_uids(&self) -> Vec<String>;
    /// Resolves once the initial list is in the cache.
    fn ready(&self) -> BoxFuture<'static, ()>;
}

impl<K: PrimaryResource> ChildCache for SharedWatch<K> {
    fn subscribe_parents(&self, deliver: ParentSink) {
        // A child without a parent reference (edited by hand) is no one's change.
        self.subscribe(move |change| ParentRef::of(change.object().meta()).is_none_or(&deliver));
    }

    fn children_of(&self, parent_uid: &str) -> Vec<ObjectMeta> {
        self.indexed(parent_uid)
            .iter()
            .map(|child| child.meta().clone())
            .collect()
    }

    fn get(&self, namespace: Option<&str>, name: &str) -> Option<ObjectMeta> {
        self.store()
            .get(&object_ref(namespace, name))
            .map(|child| child.meta().clone())
    }

    fn parent_uids(&self) -> Vec<String> {
        self.index_values()
    }

    fn ready(&self) -> BoxFuture<'static, ()> {
        self.listed().map(|_| ()).boxed()
    }
}

/// Children are watched only where this controller put them (the label selector keeps other objects of the
/// kind out of the cache), and by their metadata only: linking, repairing (a spec edit bumps the
/// generation, a deletion is an event) and pruning need no more, and a child's spec and status would cost
/// most of the cache's memory.
pub(crate) fn open_child_watch<K: PrimaryResource>(
    registry: &WatchRegistry,
    context: &str,
    namespace: Option<&str>,
    controller: &str,
    client: Client,
) -> Arc<dyn ChildCache> {
    let key = child_key::<PartialObjectMeta<K>>(context, namespace, controller);
    registry.watch_with::<PartialObjectMeta<K>>(key, client, without_managed_fields)
}

/// Drops `managedFields`: the runtime never reads them, and they are most of a child's metadata (about
/// 8 of 10 KB of heap per cached Deployment, measured by the bench's `child_cache` section).
fn without_managed_fields<K: ResourceExt>(object: &mut K) {
    object.managed_fields_mut().clear();
}

/// Like [`open_child_watch`], caching whole objects, for a child kind the reconcile reads through
/// `Cx::cached`.
pub(crate) fn open_full_child_watch<K: PrimaryResource>(
    registry: &WatchRegistry,
    context: &str,
    namespace: Option<&str>,
    controller: &str,
    client: Client,
) -> Arc<dyn ChildCache> {
    registry.watch::<K>(child_key::<K>(context, namespace, controller), client)
}

fn child_key<T: 'static>(context: &str, namespace: Option<&str>, controller: &str) -> WatchKey {
    WatchKey {
        context: context.to_owned(),
        kind: TypeId::of::<T>(),
        namespace: namespace.map(str::to_owned),
        label_selector: Some(format!("{CONTROLLER_LABEL}={controller}")),
        field_selector: None,
        index_label: Some(PARENT_UID_LABEL),
    }
}
