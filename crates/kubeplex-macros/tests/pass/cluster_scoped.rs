//! Cluster-scoped kinds without `namespaces` are fine, as the primary resource and as children; the
//! same kind may be owned twice in disjoint contexts.
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kubeplex::prelude::*;

kubeplex::contexts! {
    pub enum Fleet { Control = "control", ClusterA = "cluster-a", ClusterB = "cluster-b" }
}

#[controller(
    crd = Namespace,
    contexts = [Fleet::Control],
    owns(ClusterRole, contexts = [Fleet::ClusterA, Fleet::ClusterB]),
    owns(ConfigMap, contexts = [Fleet::ClusterA], namespaces = ["a"]),
    owns(ConfigMap, contexts = [Fleet::ClusterB], namespaces = ["b"]),
)]
struct NamespaceMirror;

#[test]
fn builds_its_plan() {
    let plan = NamespaceMirror::plan();
    assert_eq!(plan.children().len(), 3);
    assert_eq!("cluster-b".parse::<Fleet>().unwrap(), Fleet::ClusterB);
}
