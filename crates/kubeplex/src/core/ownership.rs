//! How a child in any cluster points at its parent: labels to select by, annotations for the rest.
//!
//! Kubernetes' ownerReferences only work within one cluster: a cross-cluster one names a UID the child's
//! garbage collector cannot find, and it deletes the child as an orphan. So the runtime never writes one.

use std::collections::BTreeMap;

use kube::Resource;
use kube::api::ObjectMeta;
use kube::runtime::reflector::ObjectRef;

/// Label on every child: the name of the controller that manages it (children are watched by it).
pub const CONTROLLER_LABEL: &str = "kubeplex.dev/controller";
/// Label on every child: the UID of its parent, to list one parent's children in any cluster.
pub const PARENT_UID_LABEL: &str = "kubeplex.dev/parent-uid";
/// Annotation on every child: `context/namespace/name` of its parent (namespace empty when cluster-scoped).
/// Read from the right: namespaces and names never contain `/`, a context name may (`arn:…:cluster/prod`).
pub const PARENT_ANNOTATION: &str = "kubeplex.dev/parent";
/// Annotation on every child: the parent's kind, `Kind.group/version`.
pub const PARENT_KIND_ANNOTATION: &str = "kubeplex.dev/parent-kind";

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
        let uid = child.labels.as_ref()?.get(PARENT_UID_LABEL)?.clone();
        let mut parts = child
            .annotations
            .as_ref()?
            .get(PARENT_ANNOTATION)?
            .rsplitn(3, '/');
        let (name, namespace, context) = (parts.next()?, parts.next()?, parts.next()?);
        if context.is_empty() || name.is_empty() {
            return None;
        }
        Some(Self {
            context: context.to_owned(),
            namespace: (!namespace.is_empty()).then(|| namespace.to_owned()),
            name: name.to_owned(),
            uid,
        })
    }

    /// The parent as a cache key of its kind, carrying its UID (which keys ignore), so that a request for a
    /// parent that is gone still says which one it was.
    pub(crate) fn object_ref<K: Resource<DynamicType = ()>>(&self) -> ObjectRef<K> {
        let mut object = super::object_ref(self.namespace.as_deref(), &self.name);
        object.extra.uid = Some(self.uid.clone());
        object
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
