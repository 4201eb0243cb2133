//! Kinds watched without being reconciled or owned: mapped to parents, or reconciling every parent; in
//! typed contexts, in every member, or both; with namespaces and selectors.
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Secret};
use kube::runtime::reflector::ObjectRef;
use kubeplex::prelude::*;

kubeplex::contexts! {
    pub enum Fleet { Control = "control", ClusterA = "cluster-a" }
}

/// The parent a Secret names in its label.
fn parent_of(secret: &Secret, _: &Cluster<Fleet>, _gone: bool) -> Vec<ObjectRef<ConfigMap>> {
    let labels = secret.metadata.labels.as_ref();
    let parent = labels.and_then(|l| l.get("example.com/parent"));
    parent
        .map(|p| ObjectRef::new(p).within("crds"))
        .into_iter()
        .collect()
}

#[controller(
    crd = ConfigMap,
    contexts = [Fleet::Control],
    namespaces = ["crds"],
    ignore_readiness_flips,
    watches(Node, contexts = [Fleet::ClusterA], members, label_selector = "node-role.kubernetes.io/worker"),
    watches(Secret, members, namespaces = ["apps"], field_selector = "type=Opaque", map = parent_of),
)]
struct Placer;

impl Reconcile for Placer {
    type Error = kubeplex::Error;

    async fn reconcile(&self, _: Arc<ConfigMap>, cx: &Cx<Fleet>) -> Result<Action, Self::Error> {
        let _nodes: Vec<Arc<Node>> = cx.cached::<Node>(Fleet::ClusterA)?;
        Ok(Action::await_change())
    }
}

#[test]
fn builds_its_plan() {
    let plan = Placer::plan();
    let [nodes, secrets] = plan.watched() else {
        panic!("two watched kinds")
    };
    assert_eq!(nodes.resource().kind, "Node");
    assert_eq!(nodes.contexts(), [Fleet::ClusterA]);
    assert!(nodes.in_members() && !nodes.is_mapped());
    assert_eq!(
        nodes.label_selector(),
        Some("node-role.kubernetes.io/worker")
    );
    assert!(secrets.in_members() && secrets.is_mapped());
    assert_eq!(secrets.namespaces(), ["apps"]);
    assert_eq!(secrets.field_selector(), Some("type=Opaque"));
    assert!(plan.works_in_members() && !plan.in_members());
    assert_eq!(plan.all_contexts(), [Fleet::Control, Fleet::ClusterA]);
    assert!(!plan.follows_readiness_flips());
    assert_eq!(plan.problem(), None);
}
