//! A test engine of [`TestController`]: its caches are given, its clients stand-in servers.

use std::sync::Arc;

use indexmap::IndexSet;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::ObjectMeta;

use futures::FutureExt;
use futures::future::BoxFuture;

use crate::controller::Controller;
pub(crate) use crate::controller::test_controller::{CLUSTER_A, CONTROL_CLUSTER, TestController};
use crate::core::PARENT_UID_LABEL;
use crate::engine::engine::Engine;
use crate::watch::ChildCache;

/// An engine of [`TestController`] whose every context is reached through `client`.
pub(crate) fn engine(client: Client) -> Engine<TestController> {
    engine_with(client.clone(), client)
}

/// An engine of [`TestController`] that reaches `control` and `cluster-a` through clients of their own.
pub(crate) fn engine_with(control: Client, cluster_a: Client) -> Engine<TestController> {
    let runtime = crate::controller::test_controller::runtime(control, cluster_a);
    Engine::new(
        TestController,
        Arc::new(TestController::plan()),
        runtime,
        Default::default(),
        Vec::new(),
    )
}

/// A parent in `control`, namespace `crds`, with these finalizers.
pub(crate) fn parent(finalizers: &[&str]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some("parent".into()),
            namespace: Some("crds".into()),
            uid: Some("uid-parent".into()),
            resource_version: Some("1".into()),
            finalizers: Some(finalizers.iter().map(|f| (*f).to_owned()).collect()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

/// A child of the test parent in cluster-a, namespace `ns`, called `name`.
pub(crate) fn child_meta(name: &str) -> ObjectMeta {
    let parent = crate::core::ParentRef {
        context: "control".into(),
        namespace: Some("crds".into()),
        name: "parent".into(),
        uid: "uid-parent".into(),
    };
    let (labels, annotations) = parent.stamp("test-controller", "ConfigMap/v1");
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some("ns".into()),
        labels: Some(labels),
        annotations: Some(annotations),
        ..ObjectMeta::default()
    }
}

/// A child cache holding fixed children.
pub(crate) struct FixedCache(pub(crate) Vec<ObjectMeta>);

impl ChildCache for FixedCache {
    fn subscribe_delivered(&self, _: crate::watch::DeliveredSink) {}
    fn subscribe_parents(&self, _: crate::watch::ParentSink) {}
    fn children_of(&self, parent_uid: &str) -> Vec<ObjectMeta> {
        self.0
            .iter()
            .filter(|m| is_child_of(m, parent_uid))
            .cloned()
            .collect()
    }
    fn get(&self, namespace: Option<&str>, name: &str) -> Option<ObjectMeta> {
        let found = self
            .0
            .iter()
            .find(|m| m.namespace.as_deref() == namespace && m.name.as_deref() == Some(name));
        found.cloned()
    }
    fn parent_uids(&self) -> Vec<String> {
        let uids: IndexSet<&String> = (self.0.iter())
            .filter_map(|m| m.labels.as_ref()?.get(PARENT_UID_LABEL))
            .collect();
        uids.into_iter().cloned().collect()
    }
    fn ready(&self) -> BoxFuture<'static, ()> {
        async {}.boxed()
    }
    fn has_listed(&self) -> bool {
        true
    }
    /// Every fixed child is healthy.
    fn health_of(&self, parent_uid: &str) -> Vec<crate::core::ChildHealth> {
        let children = self.children_of(parent_uid);
        children.iter().map(healthy).collect()
    }
    fn health(&self, namespace: Option<&str>, name: &str) -> Option<crate::core::ChildHealth> {
        self.get(namespace, name).as_ref().map(healthy)
    }
    fn health_counts(&self) -> [u32; crate::core::Health::ALL.len()] {
        let mut counts = [0; crate::core::Health::ALL.len()];
        counts[0] = u32::try_from(self.0.len()).unwrap_or(u32::MAX);
        counts
    }
    fn judge_answer(&self, object: serde_json::Value) -> crate::core::ChildHealth {
        let meta = serde_json::from_value(object["metadata"].clone()).unwrap_or_default();
        healthy(&meta)
    }

    fn uids(&self) -> Vec<String> {
        self.0.iter().filter_map(|m| m.uid.clone()).collect()
    }
}

fn healthy(meta: &ObjectMeta) -> crate::core::ChildHealth {
    let projection = crate::core::Projection::new(meta.clone(), None, None);
    let verdict = crate::core::Assessment::healthy("fixed");
    crate::core::ChildHealth::judged(std::sync::Arc::new(projection), verdict)
}

/// `metadata` (of a child, as JSON) linked to [`parent`], as the controller stamps its children.
pub(crate) fn linked(mut metadata: serde_json::Value) -> serde_json::Value {
    let parent = crate::core::ParentRef {
        context: "control".into(),
        namespace: Some("crds".into()),
        name: "parent".into(),
        uid: "uid-parent".into(),
    };
    let (labels, annotations) = parent.stamp(TestController::plan().name(), "ConfigMap/v1");
    metadata["labels"] = serde_json::json!(labels);
    for (key, value) in annotations {
        metadata["annotations"][key] = value.into();
    }
    metadata
}

/// Whether `meta` carries the UID label of the parent with this UID (as a child cache indexes it).
fn is_child_of(meta: &ObjectMeta, parent_uid: &str) -> bool {
    let labels = meta.labels.as_ref();
    labels
        .and_then(|l| l.get(PARENT_UID_LABEL))
        .is_some_and(|uid| uid == parent_uid)
}
