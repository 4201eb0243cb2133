//! The generated checks (kinds, namespaced kinds, fleet members) raise no warnings, even denied.
#![deny(warnings)]
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kubeplex::controller;

kubeplex::contexts! {
    pub enum Fleet { Control = "control", ClusterA = "cluster-a" }
}

#[controller(
    crd = ConfigMap,
    contexts = [Fleet::Control],
    namespaces = ["crds"],
    owns(Deployment, contexts = [Fleet::ClusterA], namespaces = ["apps"]),
)]
pub struct Typed;

#[controller(crd = ConfigMap, fleet = Fleet, contexts = ["control"], namespaces = ["crds"])]
pub struct Named;

#[test]
fn compiles() {
    let _ = (Typed, Named);
}
