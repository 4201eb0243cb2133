//! How a child in any cluster points at its parent: labels to select by, annotations for the rest.
//!
//! Kubernetes' ownerReferences only work within one cluster: a cross-cluster one names a UID the child's
//! garbage collector cannot find, and it deletes the child as an orphan. So the runtime never writes one.

use std::collections::BTreeMap;

use kube::api::ObjectMeta;

/// Label on every child: the name of the controller that manages it (children are watched by it).
pub const CONTROLLER_LABEL: &str = "kubeplex.dev/controller";
/// Label on every child: the UID of its parent, to list one parent's children in any cluster.
pub const PARENT_UID_LABEL: &str = "kubeplex.dev/parent-uid";
/// Annotation on every child: `context/namespace/name` of its parent (namespace empty when cluster-scoped).
pub const PARENT_ANNOTATION: &str = "kubeplex.dev/parent";
/// Annotation on every child: the parent's kind, `Kind.group/version`.
pub const PARENT_KIND_ANNOTATION: &str = "kubeplex.dev/parent-kind";

/// Where a child's parent lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ParentRef {
    pub(crate) context: String,
    pub(crate) namespace: Option<String>,
    pub(crate) name: String,
    pub(crate) uid: String,
}

impl ParentRef {
    /// Reads the parent reference of a child, if it has a complete one.
    pub(crate) fn of(child: &ObjectMeta) -> Option<Self> {
        let uid = child.labels.as_ref()?.get(PARENT_UID_LABEL)?.clone();
        let mut parts = child
            .annotations
            .as_ref()?
            .get(PARENT_ANNOTATION)?
            .splitn(3, '/');
        let (context, namespace, name) = (parts.next()?, parts.next()?, parts.next()?);
        Some(Self {
            context: context.to_owned(),
            namespace: (!namespace.is_empty()).then(|| namespace.to_owned()),
            name: name.to_owned(),
            uid,
        })
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
        let parent = format!(
            "{}/{}/{}",
            self.context,
            self.namespace.as_deref().unwrap_or(""),
            self.name
        );
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

/// `Kind.group/version` of a kind, as probes and annotations show it.
pub(crate) fn kind_label(kind: &str, group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("{kind}/{version}")
    } else {
        format!("{kind}.{group}/{version}")
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
}
