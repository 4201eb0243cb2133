//! Which changes of a primary object trigger a reconcile: a change of what the reconcile acts on, not the
//! runtime's own status writes.
//!
//! kube-runtime's `predicates::generation` and controller-runtime's `GenerationChangedPredicate` do the same
//! for the spec. Here a change passes when the object's generation (its resourceVersion for kinds without
//! one), its labels or annotations, or whether it is being deleted changed since it last passed: a status
//! write (kubeplex's or anyone's) passes none of those, so it does not reconcile the parent again.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use kube::Resource;

use super::watches::ObjectChange;

/// Remembers, per object, what its last passing change looked like.
#[derive(Default)]
pub(crate) struct ChangeFilter {
    seen: Mutex<HashMap<(Option<String>, String), u64>>,
}

impl ChangeFilter {
    /// Whether this change should trigger a reconcile. A deletion always does (and is forgotten).
    pub(crate) fn passes<K: Resource>(&self, change: &ObjectChange<'_, K>) -> bool {
        let meta = change.object().meta();
        let key = (
            meta.namespace.clone(),
            meta.name.clone().unwrap_or_default(),
        );
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        match change {
            ObjectChange::Deleted(_) => {
                seen.remove(&key);
                true
            }
            ObjectChange::Applied(_) => {
                seen.insert(key, fingerprint(meta)) != Some(fingerprint(meta))
            }
        }
    }
}

/// What a reconcile acts on, hashed.
fn fingerprint(meta: &kube::api::ObjectMeta) -> u64 {
    let mut hasher = DefaultHasher::new();
    match meta.generation {
        Some(generation) => generation.hash(&mut hasher),
        None => meta.resource_version.hash(&mut hasher),
    }
    meta.deletion_timestamp.is_some().hash(&mut hasher);
    meta.labels.hash(&mut hasher);
    meta.annotations.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
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
    fn kinds_without_a_generation_pass_every_change() {
        let filter = ChangeFilter::default();
        assert!(filter.passes(&ObjectChange::Applied(&object(None, "1"))));
        assert!(filter.passes(&ObjectChange::Applied(&object(None, "2"))));
        assert!(!filter.passes(&ObjectChange::Applied(&object(None, "2"))));
    }
}
