//! How a child in any cluster points at its parent: labels to select by, annotations for the rest.
//!
//! Kubernetes' ownerReferences only work within one cluster: a cross-cluster one names a UID the child's
//! garbage collector cannot find, and it deletes the child as an orphan. So the runtime never writes one.
//!
//! A child its policy spares (kept when no longer declared, orphaned when its parent is deleted) is
//! unlinked: the labels go, so that no watch or list of the controller finds it any more; the annotations
//! naming the parent stay, as a record of where it came from, and let the same parent take it back.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::Resource;
use kube::api::ObjectMeta;
use kube::runtime::reflector::ObjectRef;

use super::child_policy::{ON_DELETE_ANNOTATION, ON_PRUNE_ANNOTATION};

/// Label on every child: the name of the controller that manages it (children are watched by it).
pub const CONTROLLER_LABEL: &str = "kubeplex.dev/controller";
/// Label on every child: the UID of its parent, to list one parent's children in any cluster.
pub const PARENT_UID_LABEL: &str = "kubeplex.dev/parent-uid";
/// Annotation on every child: `cluster/namespace/name` of its parent (namespace empty when cluster-scoped).
/// Read from the right: namespaces and names never contain `/`, a context name may (`arn:…:cluster/prod`).
pub const PARENT_ANNOTATION: &str = "kubeplex.dev/parent";
/// Annotation on every child: the parent's kind, `Kind.group/version`.
pub const PARENT_KIND_ANNOTATION: &str = "kubeplex.dev/parent-kind";

/// The merge patch that unlinks a child: its link labels and its policy annotations removed (the
/// annotations naming the parent stay, a record). Carries the child's UID, which the API server refuses
/// to change: a patch meant for a child deleted and replaced by another object of its name fails.
pub(crate) fn unlink_patch(uid: Option<&str>) -> serde_json::Value {
    serde_json::json!({
        "metadata": {
            "uid": uid,
            "labels": { CONTROLLER_LABEL: null, PARENT_UID_LABEL: null },
            "annotations": { ON_PRUNE_ANNOTATION: null, ON_DELETE_ANNOTATION: null },
        }
    })
}

/// Whether `meta`'s managedFields have an entry of field manager `manager`: the object was written by
/// it (the controller applies and unlinks its children under its own name as field manager).
pub(crate) fn written_by(meta: &ObjectMeta, manager: &str) -> bool {
    (meta.managed_fields.iter().flatten()).any(|entry| entry.manager.as_deref() == Some(manager))
}

/// Whether a cached child was written by the controller its [`CONTROLLER_LABEL`] names: what a child
/// cache keeps of its managedFields.
pub(crate) fn written_by_its_controller(meta: &ObjectMeta) -> bool {
    let controller = meta.labels.as_ref().and_then(|l| l.get(CONTROLLER_LABEL));
    controller.is_some_and(|controller| written_by(meta, controller))
}

/// The managedFields a child cache hands out for a child its controller wrote: that manager's entry,
/// naming only the manager (what [`written_by`] reads).
pub(crate) fn written_marker(meta: &mut ObjectMeta) {
    let controller = meta.labels.as_ref().and_then(|l| l.get(CONTROLLER_LABEL));
    meta.managed_fields = controller.map(|controller| {
        vec![ManagedFieldsEntry {
            manager: Some(controller.clone()),
            ..ManagedFieldsEntry::default()
        }]
    });
}

/// Where a child's parent lives.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ParentRef {
    pub(crate) context: String,
    pub(crate) namespace: Option<String>,
    pub(crate) name: String,
    pub(crate) uid: String,
}

impl ParentRef {
    /// Reads the parent reference of a child, if it has a complete one.
    pub(crate) fn of(child: &ObjectMeta) -> Option<Self> {
        let uid = child.labels.as_ref()?.get(PARENT_UID_LABEL)?;
        let place = child.annotations.as_ref()?.get(PARENT_ANNOTATION)?;
        Self::parse(place, uid)
    }

    /// The parent of UID `uid` that `place` (a [`PARENT_ANNOTATION`] value) names, if it names one. Anyone
    /// who may write a child chooses its labels and annotations, and messages quote what they name, so a
    /// part that no parent could have (a context, namespace, name or UID of the wrong shape or length)
    /// names none.
    pub(crate) fn parse(place: &str, uid: &str) -> Option<Self> {
        let mut parts = place.rsplitn(3, '/');
        let (name, namespace, context) = (parts.next()?, parts.next()?, parts.next()?);
        let namespace_ok = namespace.is_empty() || kubeplex_names::dns_label(namespace).is_ok();
        if kubeplex_names::context_name(context).is_err()
            || kubeplex_names::object_name(name).is_err()
            || !namespace_ok
            || uid.is_empty()
            || kubeplex_names::label_value(uid).is_err()
        {
            return None;
        }
        Some(Self {
            context: context.to_owned(),
            namespace: (!namespace.is_empty()).then(|| namespace.to_owned()),
            name: name.to_owned(),
            uid: uid.to_owned(),
        })
    }

    /// Whether `child`'s own reference — its UID label and the parent its annotation names — is this
    /// parent, all of it: only such a child is this parent's to keep, prune or remove.
    pub(crate) fn is_parent_of(&self, child: &ObjectMeta) -> bool {
        Self::of(child).as_ref() == Some(self)
    }

    /// How messages name this parent: `cluster/namespace/name` (`cluster/name` when cluster-scoped).
    pub(crate) fn place(&self) -> String {
        let namespace = (self.namespace.as_deref()).map(|ns| format!("{ns}/"));
        format!(
            "{}/{}{}",
            self.context,
            namespace.unwrap_or_default(),
            self.name
        )
    }

    /// The parent as a cache key of its kind, carrying its UID (which keys ignore), so that a request for a
    /// parent that is gone still says which one it was.
    pub(crate) fn object_ref<K: Resource<DynamicType = ()>>(&self) -> ObjectRef<K> {
        let mut object = super::object_ref(self.namespace.as_deref(), &self.name);
        object.extra.uid = Some(self.uid.clone());
        object
    }

    /// The value of [`PARENT_ANNOTATION`] on this parent's children: `cluster/namespace/name`.
    pub(crate) fn annotation(&self) -> String {
        let namespace = self.namespace.as_deref().unwrap_or("");
        format!("{}/{namespace}/{}", self.context, self.name)
    }

    /// Whether `child` was unlinked from this parent, or from one of its kind and place (deleted and
    /// created again): it has no link labels, and its annotations name this parent. Such a child is this
    /// parent's to take back when it declares it again, as Helm adopts what an earlier release kept.
    pub(crate) fn was_unlinked_from(&self, child: &ObjectMeta, parent_kind: &str) -> bool {
        let labels = child.labels.as_ref();
        let label = |key| labels.is_some_and(|l| l.contains_key(key));
        let annotations = child.annotations.as_ref();
        let annotation = |key| annotations.and_then(|a| a.get(key)).map(String::as_str);
        !label(CONTROLLER_LABEL)
            && !label(PARENT_UID_LABEL)
            && annotation(PARENT_ANNOTATION) == Some(self.annotation().as_str())
            && annotation(PARENT_KIND_ANNOTATION) == Some(parent_kind)
    }

    /// The labels and annotations that link a child to this parent.
    pub(crate) fn stamp(
        &self,
        controller: &str,
        parent_kind: &str,
    ) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
        let labels = [
            (CONTROLLER_LABEL, controller),
            (PARENT_UID_LABEL, self.uid.as_str()),
        ];
        let parent = self.annotation();
        let annotations = [
            (PARENT_ANNOTATION, parent.as_str()),
            (PARENT_KIND_ANNOTATION, parent_kind),
        ];
        let owned = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        (owned(&labels), owned(&annotations))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamped_reference_reads_back() {
        let parent = ParentRef {
            context: "control".into(),
            namespace: Some("crds".into()),
            name: "crd-a".into(),
            uid: "6f1c".into(),
        };
        let (labels, annotations) =
            parent.stamp("app-deployer", "AppDeployment.demo.kubeplex.dev/v1");
        assert_eq!(annotations[PARENT_ANNOTATION], "control/crds/crd-a");
        let meta = ObjectMeta {
            labels: Some(labels),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        };
        assert_eq!(ParentRef::of(&meta), Some(parent));
        assert_eq!(ParentRef::of(&ObjectMeta::default()), None);
    }

    #[test]
    fn a_place_no_parent_could_have_names_none() {
        let uid = "6f1c-22";
        assert!(ParentRef::parse("control/crds/crd-a", uid).is_some());
        assert!(ParentRef::parse("control//cluster-wide", uid).is_some());
        let long = "a".repeat(300);
        let forged = [
            (format!("control/crds/{long}"), uid),
            (format!("{long}/crds/crd-a"), uid),
            ("control/Not_A_Namespace/crd-a".to_owned(), uid),
            ("con trol/crds/crd-a".to_owned(), uid),
            ("control/crds/crd\u{1b}[31m".to_owned(), uid),
            ("control/crds/crd-a".to_owned(), "uid with spaces"),
            ("control/crds/crd-a".to_owned(), ""),
            ("crds/crd-a".to_owned(), uid),
        ];
        for (place, uid) in &forged {
            assert_eq!(ParentRef::parse(place, uid), None, "{place:?} {uid:?}");
        }
    }

    #[test]
    fn a_child_is_a_parents_only_by_its_whole_reference_and_written_by_its_controller_only_by_its_manager()
     {
        let parent = ParentRef {
            context: "control".into(),
            namespace: Some("crds".into()),
            name: "crd-a".into(),
            uid: "6f1c".into(),
        };
        let (labels, annotations) = parent.stamp("app-deployer", "App.demo/v1");
        let mut child = ObjectMeta {
            labels: Some(labels),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        };
        assert!(parent.is_parent_of(&child));
        for other in [
            ParentRef {
                name: "ghost".into(),
                ..parent.clone()
            },
            ParentRef {
                namespace: None,
                ..parent.clone()
            },
            ParentRef {
                context: "cluster-a".into(),
                ..parent.clone()
            },
            ParentRef {
                uid: "7a2d".into(),
                ..parent.clone()
            },
        ] {
            assert!(!other.is_parent_of(&child), "{other:?}");
        }
        assert!(!written_by_its_controller(&child), "no managedFields");
        child.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("kubectl".into()),
            ..ManagedFieldsEntry::default()
        }]);
        assert!(!written_by_its_controller(&child), "someone else's");
        written_marker(&mut child);
        assert!(written_by(&child, "app-deployer"));
        assert!(written_by_its_controller(&child));
    }

    #[test]
    fn an_unlinked_child_keeps_only_the_record_of_its_parent_which_may_take_it_back() {
        let parent = ParentRef {
            context: "control".into(),
            namespace: Some("crds".into()),
            name: "crd-a".into(),
            uid: "6f1c".into(),
        };
        let (labels, mut annotations) = parent.stamp("app-deployer", "App.demo/v1");
        annotations.insert(ON_PRUNE_ANNOTATION.into(), "keep".into());
        let mut child = serde_json::json!({ "metadata": {
            "uid": "c-1", "labels": labels, "annotations": annotations,
        }});
        json_patch::merge(&mut child, &unlink_patch(Some("c-1")));
        let meta: ObjectMeta = serde_json::from_value(child["metadata"].clone()).unwrap();
        assert_eq!(
            meta.labels,
            Some(BTreeMap::new()),
            "watched and listed by nothing"
        );
        let kept: Vec<&str> = meta
            .annotations
            .iter()
            .flatten()
            .map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(kept, [PARENT_ANNOTATION, PARENT_KIND_ANNOTATION]);
        assert_eq!(ParentRef::of(&meta), None, "no longer a child");
        assert!(parent.was_unlinked_from(&meta, "App.demo/v1"));
        // A parent of that kind and place created again may take it back; another may not.
        let again = ParentRef {
            uid: "7a2d".into(),
            ..parent.clone()
        };
        assert!(again.was_unlinked_from(&meta, "App.demo/v1"));
        let other = ParentRef {
            name: "crd-b".into(),
            ..parent.clone()
        };
        assert!(!other.was_unlinked_from(&meta, "App.demo/v1"));
        assert!(!parent.was_unlinked_from(&meta, "Other.demo/v1"));
        // A linked child is not an unlinked one.
        let (labels, annotations) = parent.stamp("app-deployer", "App.demo/v1");
        let linked = ObjectMeta {
            labels: Some(labels),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        };
        assert!(!parent.was_unlinked_from(&linked, "App.demo/v1"));
    }

    #[test]
    fn any_valid_context_name_round_trips_even_with_slashes() {
        for (context, namespace) in [
            (
                "arn:aws:eks:eu-west-1:123456789012:cluster/prod",
                Some("crds"),
            ),
            ("gke_project_europe-west1_cluster/with/slashes", None),
        ] {
            let parent = ParentRef {
                context: context.into(),
                namespace: namespace.map(str::to_owned),
                name: "crd-a".into(),
                uid: "6f1c".into(),
            };
            let (labels, annotations) = parent.stamp("app-deployer", "AppDeployment.demo/v1");
            let meta = ObjectMeta {
                labels: Some(labels),
                annotations: Some(annotations),
                ..ObjectMeta::default()
            };
            assert_eq!(ParentRef::of(&meta), Some(parent.clone()));
            let object = parent.object_ref::<k8s_openapi::api::core::v1::ConfigMap>();
            assert_eq!(
                (object.name.as_str(), object.namespace.as_deref()),
                ("crd-a", namespace)
            );
        }
    }
}
