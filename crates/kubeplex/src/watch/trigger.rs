//! Which changes of a primary object trigger a reconcile: a change of what the reconcile acts on, not the
//! runtime's own status writes.
//!
//! A change passes when the object's generation (its resourceVersion for kinds without one), its labels or
//! annotations, whether it is being deleted, or its uid (it was deleted and created again while the watch
//! was away) changed since it last passed: a status write (kubeplex's or anyone's) changes none of those,
//! so it does not reconcile the parent again. controller-runtime's `GenerationChangedPredicate` does the
//! same for the spec.
//!
//! The hash is kube-runtime's: its `predicates` (`generation`, `resource_version`, `labels`,
//! `annotations`), put together with `Predicate::fallback` and `combine`. Its stream adapter,
//! `WatchStreamExt::predicate_filter`, does not fit, and so the state is kept here: it filters one
//! `watcher` stream of objects for one consumer and keeps its hashes per object in that stream, whereas a
//! primary watch here is shared (one `SharedWatch` per kind, cluster and namespace feeds every controller
//! that subscribes, through `Change`s), each controller filters its own subscription, and a deletion must
//! always pass and be forgotten, which `predicate_filter` may swallow when the hash did not change.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use kube::Resource;
use kube::runtime::{Predicate, predicates};
use parking_lot::Mutex;

use super::label_index::Name;
use super::watches::ObjectChange;

/// Remembers, per object, what its last passing change looked like.
#[derive(Default)]
pub(crate) struct ChangeFilter(ChildChangeFilter);

/// The health a primary's changes are remembered with: it has none of its own, so only what a reconcile
/// acts on decides.
const NO_HEALTH: u64 = 0;

impl ChangeFilter {
    /// Whether this change should trigger a reconcile. A deletion always does (and is forgotten).
    pub(crate) fn passes<K: Resource>(&self, change: &ObjectChange<'_, K>) -> bool {
        self.0.passes(change, NO_HEALTH).is_some()
    }
}

/// Which kind of change of a child re-queues its parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChildChangeKind {
    /// What the runtime links, repairs and prunes by: its spec (generation), labels, annotations,
    /// deletion, uid; or the child is new, or gone.
    Object,
    /// Only its health or the reason for it: a status change the parent's status may show.
    Health,
}

/// Remembers, per child, its last passing change and the health it had: a status write of a child (a
/// Deployment's as each pod comes and goes) passes only when its health or the reason changed, so that
/// pod churn does not flood the parent's queue.
#[derive(Default)]
pub(crate) struct ChildChangeFilter {
    seen: Mutex<HashMap<Name, (Option<u64>, u64)>>,
}

impl ChildChangeFilter {
    /// Whether this change of a child whose health hashes to `health` re-queues its parent, and why.
    pub(crate) fn passes<K: Resource>(
        &self,
        change: &ObjectChange<'_, K>,
        health: u64,
    ) -> Option<ChildChangeKind> {
        let meta = change.object().meta();
        let key = (
            meta.namespace.clone(),
            meta.name.clone().unwrap_or_default(),
        );
        let mut seen = self.seen.lock();
        match change {
            ObjectChange::Deleted(_) => {
                seen.remove(&key);
                Some(ChildChangeKind::Object)
            }
            ObjectChange::Applied(object) => {
                let print = fingerprint(*object);
                match seen.insert(key, (print, health)) {
                    Some((before, _)) if before != print => Some(ChildChangeKind::Object),
                    None => Some(ChildChangeKind::Object),
                    Some((_, before)) if before != health => Some(ChildChangeKind::Health),
                    Some(_) => None,
                }
            }
        }
    }
}

/// What a reconcile acts on, hashed: kube-runtime's predicates, and two of this filter's own.
fn fingerprint<K: Resource>(object: &K) -> Option<u64> {
    predicates::generation
        .fallback(predicates::resource_version)
        .combine(predicates::labels)
        .combine(predicates::annotations)
        .combine(deleting)
        .combine(uid)
        .hash_property(object)
}

/// Whether the object is being deleted (its deletion timestamp is set, its generation may not move).
fn deleting<K: Resource>(object: &K) -> Option<u64> {
    Some(u64::from(object.meta().deletion_timestamp.is_some()))
}

/// The object's uid, hashed: the same name with another uid is another object.
fn uid<K: Resource>(object: &K) -> Option<u64> {
    let mut hasher = DefaultHasher::new();
    object.meta().uid.as_ref()?.hash(&mut hasher);
    Some(hasher.finish())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_childs_status_write_passes_only_when_its_health_changed() {
        let filter = ChildChangeFilter::default();
        let mut child = object(Some(1), "10");
        let seen = |child: &ConfigMap, health| filter.passes(&ObjectChange::Applied(child), health);
        assert_eq!(
            seen(&child, 1),
            Some(ChildChangeKind::Object),
            "first sight"
        );
        child.metadata.resource_version = Some("11".into());
        assert_eq!(seen(&child, 1), None, "a status write, the same health");
        child.metadata.resource_version = Some("12".into());
        assert_eq!(seen(&child, 2), Some(ChildChangeKind::Health));
        child.metadata.generation = Some(2);
        assert_eq!(
            seen(&child, 2),
            Some(ChildChangeKind::Object),
            "a spec change"
        );
        assert_eq!(
            filter.passes(&ObjectChange::Deleted(&child), 2),
            Some(ChildChangeKind::Object)
        );
    }

    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    fn object(generation: Option<i64>, resource_version: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("parent".into()),
                generation,
                resource_version: Some(resource_version.into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    #[test]
    fn a_status_write_does_not_pass_a_spec_change_labels_and_deletion_do() {
        let filter = ChangeFilter::default();
        let mut parent = object(Some(1), "10");
        assert!(
            filter.passes(&ObjectChange::Applied(&parent)),
            "first sight"
        );
        parent.metadata.resource_version = Some("11".into());
        assert!(
            !filter.passes(&ObjectChange::Applied(&parent)),
            "a status write: same generation"
        );
        parent.metadata.generation = Some(2);
        assert!(
            filter.passes(&ObjectChange::Applied(&parent)),
            "a spec change"
        );
        parent.metadata.labels = Some(BTreeMap::from([("a".to_owned(), "b".to_owned())]));
        assert!(filter.passes(&ObjectChange::Applied(&parent)), "a label");
        parent.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ));
        assert!(
            filter.passes(&ObjectChange::Applied(&parent)),
            "deletion requested"
        );
        assert!(filter.passes(&ObjectChange::Deleted(&parent)));
        assert!(
            filter.passes(&ObjectChange::Applied(&parent)),
            "forgotten after a deletion"
        );
    }

    #[test]
    fn the_same_name_created_again_passes() {
        let filter = ChangeFilter::default();
        let mut parent = object(Some(1), "10");
        parent.metadata.uid = Some("first".into());
        assert!(filter.passes(&ObjectChange::Applied(&parent)));
        assert!(!filter.passes(&ObjectChange::Applied(&parent)));
        // Deleted and created again while the watch was away: the relist shows it applied, never deleted.
        parent.metadata.uid = Some("second".into());
        assert!(
            filter.passes(&ObjectChange::Applied(&parent)),
            "another object"
        );
    }

    #[test]
    fn kinds_without_a_generation_pass_every_change() {
        let filter = ChangeFilter::default();
        assert!(filter.passes(&ObjectChange::Applied(&object(None, "1"))));
        assert!(filter.passes(&ObjectChange::Applied(&object(None, "2"))));
        assert!(!filter.passes(&ObjectChange::Applied(&object(None, "2"))));
    }
}
