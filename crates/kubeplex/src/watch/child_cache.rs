//! A child kind's shared watch, seen without its type: what syncing, pruning and the orphan sweep need.
//!
//! A plan names its child kinds by type, but the runtime handles them together; this is the type-erased view
//! of one child kind's cache in one (cluster, namespace), indexed by the parent's UID so that a reconcile
//! reads only its own parent's children.

use std::any::TypeId;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use kube::Client;
use kube::api::ObjectMeta;

use super::projected::Projected;
use super::trigger::{ChildChangeFilter, ChildChangeKind};
use super::watches::{SharedWatch, WatchKey, WatchRegistry};
use crate::core::{Assessment, ChildHealth, Health, HealthRule, Projection, assess};
use crate::core::{CONTROLLER_LABEL, PARENT_UID_LABEL, ParentRef, parents_of};
use crate::core::{PrimaryResource, object_ref};
use crate::core::{written_by_its_controller, written_marker};

/// Opens the shared watch of one child kind in one (cluster, namespace), for one controller's children,
/// whose health `rule` judges.
pub(crate) type OpenChildWatch = fn(
    registry: &WatchRegistry,
    context: &str,
    namespace: Option<&str>,
    controller: &str,
    client: Client,
    rule: HealthRule,
) -> Arc<dyn ChildCache>;

/// Takes the parent of a changed child and what changed (into a queue, as a key); `false` once it takes no
/// more.
pub(crate) type ParentSink = Box<dyn Fn(ParentRef, ChildChangeKind) -> bool + Send + Sync>;

/// Takes the namespace and name of a child the watch delivered; `false` once it takes no more.
pub(crate) type DeliveredSink = Box<dyn Fn(Option<&str>, &str) -> bool + Send + Sync>;

/// A child kind's cache, through the metadata the runtime needs to link, repair and prune, and the health
/// of each child.
pub(crate) trait ChildCache: Send + Sync {
    /// Hands `delivered` every child the watch delivers (created, changed or deleted) from now on, until it
    /// returns `false`.
    fn subscribe_delivered(&self, delivered: DeliveredSink);
    /// Hands `deliver` the parent of every changed child from now on, preceded by those of the cached
    /// ones, until it returns `false` (see [`SharedWatch::subscribe`]). A child's status write is handed
    /// on only when its health (or the reason for it) changed.
    fn subscribe_parents(&self, deliver: ParentSink);
    /// The cached children of the parent with this UID.
    fn children_of(&self, parent_uid: &str) -> Vec<ObjectMeta>;
    /// The cached child called `name` in `namespace`, whoever its parent; its managedFields only the
    /// entry of the controller its label names, naming the manager alone, when that controller wrote it.
    fn get(&self, namespace: Option<&str>, name: &str) -> Option<ObjectMeta>;
    /// The UID of every parent with children in the cache.
    fn parent_uids(&self) -> Vec<String>;
    /// Resolves once the initial list is in the cache.
    fn ready(&self) -> BoxFuture<'static, ()>;
    /// Whether the initial list is in the cache now.
    fn has_listed(&self) -> bool;
    /// The cached children of the parent with this UID, each with its health.
    fn health_of(&self, parent_uid: &str) -> Vec<ChildHealth>;
    /// The cached child called `name` in `namespace` with its health.
    fn health(&self, namespace: Option<&str>, name: &str) -> Option<ChildHealth>;
    /// How many cached children are in each health, in the order of [`Health::ALL`].
    fn health_counts(&self) -> [u32; Health::ALL.len()];
    /// A child as the server answered its apply, judged by this kind's rule (what the cache will say once
    /// its watch delivers it).
    fn judge_answer(&self, object: serde_json::Value) -> ChildHealth;
    /// The UID of every cached child.
    fn uids(&self) -> Vec<String>;
}

/// A child kind's watch with the rule that judges its children, and how a cached object is projected.
struct HealthCache<T: PrimaryResource> {
    watch: Arc<SharedWatch<T>>,
    rule: HealthRule,
    project: fn(&T) -> Arc<Projection>,
    /// Whether a cached object was written by the controller its label names.
    written: fn(&T) -> bool,
}

impl<T: PrimaryResource> HealthCache<T> {
    fn judge(&self, object: &T) -> ChildHealth {
        let projection = (self.project)(object);
        let verdict = assess(self.rule, &projection);
        ChildHealth::judged(projection, verdict)
    }
}

impl<T: PrimaryResource> ChildCache for HealthCache<T> {
    fn subscribe_delivered(&self, delivered: DeliveredSink) {
        self.watch.subscribe(move |change| {
            let meta = change.object().meta();
            delivered(
                meta.namespace.as_deref(),
                meta.name.as_deref().unwrap_or_default(),
            )
        });
    }

    fn subscribe_parents(&self, deliver: ParentSink) {
        let (rule, project) = (self.rule, self.project);
        let changed = ChildChangeFilter::default();
        self.watch.subscribe(move |change| {
            // A child without a parent reference (edited by hand) is no one's change; a shared child's is
            // each of its parents'.
            let parents = parents_of(change.object().meta());
            if parents.is_empty() {
                return true;
            }
            let health = hashed(&assess(rule, &project(change.object())));
            match changed.passes(change, health) {
                Some(what) => parents.into_iter().all(|parent| deliver(parent, what)),
                None => true,
            }
        });
    }

    fn children_of(&self, parent_uid: &str) -> Vec<ObjectMeta> {
        self.watch
            .indexed(parent_uid)
            .iter()
            .map(|child| child.meta().clone())
            .collect()
    }

    fn get(&self, namespace: Option<&str>, name: &str) -> Option<ObjectMeta> {
        let child = self.watch.store().get(&object_ref(namespace, name))?;
        let mut meta = child.meta().clone();
        meta.managed_fields = None;
        if (self.written)(&child) {
            written_marker(&mut meta);
        }
        Some(meta)
    }

    fn parent_uids(&self) -> Vec<String> {
        self.watch.index_values()
    }

    fn ready(&self) -> BoxFuture<'static, ()> {
        self.watch.listed().map(|_| ()).boxed()
    }

    fn has_listed(&self) -> bool {
        self.watch.has_listed()
    }

    fn health_of(&self, parent_uid: &str) -> Vec<ChildHealth> {
        let children = self.watch.indexed(parent_uid);
        children.iter().map(|child| self.judge(child)).collect()
    }

    fn health(&self, namespace: Option<&str>, name: &str) -> Option<ChildHealth> {
        let child = self.watch.store().get(&object_ref(namespace, name))?;
        Some(self.judge(&child))
    }

    fn health_counts(&self) -> [u32; Health::ALL.len()] {
        let mut counts = [0; Health::ALL.len()];
        for child in self.watch.store().state() {
            let health = assess(self.rule, &(self.project)(&child)).health;
            if let Some(at) = Health::ALL.iter().position(|h| *h == health) {
                counts[at] += 1;
            }
        }
        counts
    }

    fn judge_answer(&self, object: serde_json::Value) -> ChildHealth {
        let projection = Arc::new(Projection::of_value(object));
        let verdict = assess(self.rule, &projection);
        ChildHealth::judged(projection, verdict)
    }

    fn uids(&self) -> Vec<String> {
        let children = self.watch.store().state();
        children
            .iter()
            .filter_map(|c| c.meta().uid.clone())
            .collect()
    }
}

/// A verdict, hashed: what the change filter compares.
fn hashed(verdict: &Assessment) -> u64 {
    let mut hasher = DefaultHasher::new();
    verdict.hash(&mut hasher);
    hasher.finish()
}

/// Children are watched only where this controller put them (the label selector keeps other objects of the
/// kind out of the cache), and projected: their metadata without `managedFields` (linking, repairing — a
/// spec edit bumps the generation, a deletion is an event — and pruning need no more; adopting a child by
/// name needs only whether the controller is among its field managers, one flag) and the few status and
/// spec fields their health is judged from ([`Projection`]); a child's whole spec and status would cost
/// most of the cache's memory.
pub(crate) fn open_child_watch<K: PrimaryResource>(
    registry: &WatchRegistry,
    context: &str,
    namespace: Option<&str>,
    controller: &str,
    client: Client,
    rule: HealthRule,
) -> Arc<dyn ChildCache> {
    let key = child_key::<Projected<K>>(context, namespace, controller);
    let watch = registry.watch::<Projected<K>>(key, client);
    Arc::new(HealthCache {
        watch,
        rule,
        project: |child: &Projected<K>| Arc::clone(&child.projection),
        written: |child: &Projected<K>| child.written,
    })
}

/// Like [`open_child_watch`], caching whole objects, for a child kind the reconcile reads through
/// `Cx::cached`; each child is projected when its health is asked for.
pub(crate) fn open_full_child_watch<K: PrimaryResource>(
    registry: &WatchRegistry,
    context: &str,
    namespace: Option<&str>,
    controller: &str,
    client: Client,
    rule: HealthRule,
) -> Arc<dyn ChildCache> {
    let watch = registry.watch::<K>(child_key::<K>(context, namespace, controller), client);
    Arc::new(HealthCache {
        watch,
        rule,
        project: |child: &K| {
            let value = serde_json::to_value(child).unwrap_or_default();
            Arc::new(Projection::of_value(value))
        },
        written: |child: &K| written_by_its_controller(child.meta()),
    })
}

/// A watch of whole objects as a child cache judged by `rule` (a test's, over a cache it fills).
#[cfg(test)]
pub(crate) fn judged<K: PrimaryResource>(
    watch: Arc<SharedWatch<K>>,
    rule: HealthRule,
) -> Arc<dyn ChildCache> {
    Arc::new(HealthCache {
        watch,
        rule,
        project: |child: &K| {
            let value = serde_json::to_value(child).unwrap_or_default();
            Arc::new(Projection::of_value(value))
        },
        written: |child: &K| written_by_its_controller(child.meta()),
    })
}

/// A child that is declared but not in its cache.
pub(crate) fn missing(namespace: Option<&str>, name: &str) -> ChildHealth {
    let verdict = Assessment::new(Health::Missing, "not in the cluster");
    ChildHealth::without_projection(namespace, name, verdict)
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
