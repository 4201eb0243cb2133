//! How a child that several parents declare (a shared child: a Namespace, a ConfigMap, a CRD) names them
//! all: one label and one annotation per parent, keyed by the parent's UID. Each parent adds and removes
//! its own pair with a merge patch that touches no other key, so two parents reconciling at once never drop
//! each other; server-side apply, which the controller writes the child's content with, never carries them
//! (one field manager for every parent would drop the others' keys).
//!
//! A shared child carries [`SHARED_LABEL`] instead of its parent's [`PARENT_UID_LABEL`]: no single parent
//! owns it, and it goes only when the last parent lets go.

use std::collections::BTreeMap;

use kube::api::ObjectMeta;

use super::child_policy::{ON_DELETE_ANNOTATION, ON_PRUNE_ANNOTATION};
use super::ownership::{
    CONTROLLER_LABEL, PARENT_ANNOTATION, PARENT_KIND_ANNOTATION, PARENT_UID_LABEL, ParentRef,
};

/// Label on a shared child (`"true"`): every parent that declares it is recorded by its own pair of keys.
pub const SHARED_LABEL: &str = "kubeplex.dev/shared";
/// Annotation on a shared child: a digest of the content its parents apply. Parents that declare it
/// differently would overwrite each other on every reconcile; the second is refused as a conflict instead.
pub const SHARED_DIGEST_ANNOTATION: &str = "kubeplex.dev/shared-digest";

/// The label key that records one sharing parent: `kubeplex.dev/parent-uid.<uid>` (value `"true"`), which
/// a label selector finds by existence.
pub(crate) fn sharing_label(uid: &str) -> String {
    format!("{PARENT_UID_LABEL}.{uid}")
}

/// The annotation key that names one sharing parent: `kubeplex.dev/parent.<uid>`, valued as
/// [`PARENT_ANNOTATION`] is (`cluster/namespace/name`).
fn sharing_annotation(uid: &str) -> String {
    format!("{PARENT_ANNOTATION}.{uid}")
}

/// Whether `meta` is a shared child (its [`SHARED_LABEL`] says so).
pub(crate) fn is_shared(meta: &ObjectMeta) -> bool {
    let labels = meta.labels.as_ref();
    labels.and_then(|l| l.get(SHARED_LABEL)).map(String::as_str) == Some("true")
}

/// Whether a desired child, as JSON, is to be shared.
pub(crate) fn is_shared_object(object: &serde_json::Value) -> bool {
    object["metadata"]["labels"][SHARED_LABEL].as_str() == Some("true")
}

/// The parents a shared child records, each complete (a label without its annotation, or an annotation
/// that names no parent, records none).
pub(crate) fn sharing_parents(meta: &ObjectMeta) -> Vec<ParentRef> {
    let (Some(labels), Some(annotations)) = (&meta.labels, &meta.annotations) else {
        return Vec::new();
    };
    let prefix = format!("{PARENT_UID_LABEL}.");
    labels
        .keys()
        .filter_map(|key| key.strip_prefix(&prefix))
        .filter_map(|uid| {
            let place = annotations.get(&sharing_annotation(uid))?;
            ParentRef::parse(place, uid)
        })
        .collect()
}

/// The parents other than `me` that share `child`, as messages name them: the first three, then how many
/// more (`control/ns/a, control/ns/b, control/ns/c and 4 more`); `None` when there are none.
pub(crate) fn other_sharers(child: &ObjectMeta, me: &ParentRef) -> Option<String> {
    const NAMED: usize = 3;
    let others: Vec<String> = (sharing_parents(child).iter())
        .filter(|p| *p != me)
        .map(ParentRef::place)
        .collect();
    let (named, more) = others.split_at(others.len().min(NAMED));
    let more = (!more.is_empty()).then(|| format!(" and {} more", more.len()));
    (!named.is_empty()).then(|| format!("{}{}", named.join(", "), more.unwrap_or_default()))
}

/// Every parent `meta` names: its one parent, or each that shares it.
pub(crate) fn parents_of(meta: &ObjectMeta) -> Vec<ParentRef> {
    match ParentRef::of(meta) {
        Some(parent) => vec![parent],
        None => sharing_parents(meta),
    }
}

/// Whether a parent of `parent_kind` may take back `child`, a shared child its last parent left in
/// place (kept or orphaned): no link labels, and the record of a sharing parent of that kind. Any
/// parent of the kind may, as any could have joined it before.
pub(crate) fn was_shared(child: &ObjectMeta, parent_kind: &str) -> bool {
    let labels = child.labels.as_ref();
    let label = |key| labels.is_some_and(|l| l.contains_key(key));
    let Some(annotations) = child.annotations.as_ref() else {
        return false;
    };
    let prefix = format!("{PARENT_ANNOTATION}.");
    !label(CONTROLLER_LABEL)
        && !label(SHARED_LABEL)
        && annotations.get(PARENT_KIND_ANNOTATION).map(String::as_str) == Some(parent_kind)
        && annotations.keys().any(|key| key.starts_with(&prefix))
}

impl ParentRef {
    /// Whether this parent, all of it, is among those a shared child records.
    pub(crate) fn shares(&self, child: &ObjectMeta) -> bool {
        is_shared(child) && sharing_parents(child).contains(self)
    }

    /// This parent's pair of keys, as labels and annotations to create a shared child with.
    pub(crate) fn sharing_stamp(&self) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
        let labels = BTreeMap::from([(sharing_label(&self.uid), "true".to_owned())]);
        let annotations = BTreeMap::from([(sharing_annotation(&self.uid), self.annotation())]);
        (labels, annotations)
    }

    /// The merge patch that records this parent on the shared child of UID `child_uid` (which the server
    /// refuses to change: a patch meant for a child replaced since fails).
    pub(crate) fn join_patch(&self, child_uid: Option<&str>) -> serde_json::Value {
        let (labels, annotations) = self.sharing_stamp();
        serde_json::json!({
            "metadata": { "uid": child_uid, "labels": labels, "annotations": annotations }
        })
    }

    /// The merge patch that removes this parent's pair from a shared child others still share.
    pub(crate) fn leave_patch(&self, child_uid: Option<&str>) -> serde_json::Value {
        serde_json::json!({
            "metadata": {
                "uid": child_uid,
                "labels": { sharing_label(&self.uid): null },
                "annotations": { sharing_annotation(&self.uid): null },
            }
        })
    }

    /// The merge patch by which the last parent leaves a shared child in place, unlinked: its link labels
    /// and policies go, the annotation naming this parent stays as a record. Carries the child's UID and
    /// resourceVersion: refused if another parent joined since.
    pub(crate) fn last_unlink_patch(&self, child: &ObjectMeta) -> serde_json::Value {
        serde_json::json!({
            "metadata": {
                "uid": child.uid,
                "resourceVersion": child.resource_version,
                "labels": { CONTROLLER_LABEL: null, SHARED_LABEL: null, sharing_label(&self.uid): null },
                "annotations": { ON_PRUNE_ANNOTATION: null, ON_DELETE_ANNOTATION: null },
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(uid: &str, name: &str) -> ParentRef {
        ParentRef {
            context: "control".into(),
            namespace: Some("crds".into()),
            name: name.into(),
            uid: uid.into(),
        }
    }

    /// A shared child as the patches leave it.
    fn shared_by(parents: &[&ParentRef]) -> ObjectMeta {
        let mut child = serde_json::json!({ "metadata": {
            "uid": "c-1",
            "labels": { CONTROLLER_LABEL: "placer", SHARED_LABEL: "true" },
            "annotations": { PARENT_KIND_ANNOTATION: "Placement.demo/v1" },
        }});
        for parent in parents {
            json_patch::merge(&mut child, &parent.join_patch(Some("c-1")));
        }
        serde_json::from_value(child["metadata"].clone()).unwrap()
    }

    #[test]
    fn each_parent_joins_and_leaves_by_its_own_keys_without_touching_the_others() {
        let (a, b) = (parent("uid-a", "first"), parent("uid-b", "second"));
        let both = shared_by(&[&a, &b]);
        assert_eq!(sharing_parents(&both), [a.clone(), b.clone()]);
        assert_eq!(parents_of(&both), [a.clone(), b.clone()]);
        assert!(a.shares(&both) && b.shares(&both));
        assert_eq!(ParentRef::of(&both), None, "no single parent");

        let mut value = serde_json::json!({ "metadata": serde_json::to_value(&both).unwrap() });
        json_patch::merge(&mut value, &a.leave_patch(Some("c-1")));
        let left: ObjectMeta = serde_json::from_value(value["metadata"].clone()).unwrap();
        assert_eq!(sharing_parents(&left), std::slice::from_ref(&b));
        assert!(!a.shares(&left) && b.shares(&left));

        // The same name under another UID (deleted and created again) is another parent.
        assert!(!parent("uid-c", "first").shares(&both));
    }

    #[test]
    fn a_label_without_its_annotation_or_a_forged_place_records_no_parent() {
        let a = parent("uid-a", "first");
        let mut meta = shared_by(&[&a]);
        let annotations = meta.annotations.as_mut().unwrap();
        annotations.insert(sharing_annotation("uid-a"), "no-slashes".into());
        assert_eq!(sharing_parents(&meta), []);
        meta.annotations.as_mut().unwrap().clear();
        assert_eq!(sharing_parents(&meta), []);
        // Not shared without its label, whatever keys it has.
        let mut unshared = shared_by(&[&a]);
        unshared.labels.as_mut().unwrap().remove(SHARED_LABEL);
        assert!(!a.shares(&unshared));
    }

    #[test]
    fn messages_name_three_other_parents_and_count_the_rest_never_a_forged_one() {
        let parents: Vec<ParentRef> = (0..6)
            .map(|i| parent(&format!("uid-{i}"), &format!("p{i}")))
            .collect();
        let mut meta = shared_by(&parents.iter().collect::<Vec<_>>());
        let others = other_sharers(&meta, &parents[0]);
        let named = "control/crds/p1, control/crds/p2, control/crds/p3 and 2 more";
        assert_eq!(others.as_deref(), Some(named));
        assert_eq!(other_sharers(&shared_by(&[&parents[0]]), &parents[0]), None);
        // Whoever may write the child may add a pair of keys: a place too long to be a parent's is no parent.
        let forged = (
            "uid-forged",
            format!("control/crds/{}", "x".repeat(100_000)),
        );
        (meta.labels.as_mut().unwrap()).insert(sharing_label(forged.0), "true".into());
        (meta.annotations.as_mut().unwrap()).insert(sharing_annotation(forged.0), forged.1);
        assert_eq!(sharing_parents(&meta).len(), 6);
        assert_eq!(other_sharers(&meta, &parents[0]).as_deref(), Some(named));
    }

    #[test]
    fn the_last_parent_leaves_a_record_any_parent_of_its_kind_may_take_back() {
        let a = parent("uid-a", "first");
        let meta = shared_by(&[&a]);
        let mut value = serde_json::json!({ "metadata": serde_json::to_value(&meta).unwrap() });
        json_patch::merge(&mut value, &a.last_unlink_patch(&meta));
        let kept: ObjectMeta = serde_json::from_value(value["metadata"].clone()).unwrap();
        assert_eq!(kept.labels, Some(BTreeMap::new()));
        assert!(was_shared(&kept, "Placement.demo/v1"));
        assert!(!was_shared(&kept, "Other.demo/v1"));
        let linked = was_shared(&meta, "Placement.demo/v1");
        assert!(!linked, "still linked");
        let mut foreign = kept.clone();
        let annotations = foreign.annotations.as_mut().unwrap();
        annotations.retain(|key, _| key == PARENT_KIND_ANNOTATION);
        let recorded = was_shared(&foreign, "Placement.demo/v1");
        assert!(!recorded, "no record of a sharing parent");
    }
}
