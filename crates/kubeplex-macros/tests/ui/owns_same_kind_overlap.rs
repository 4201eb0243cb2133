use k8s_openapi::api::apps::v1::Deployment;
use kubeplex::controller;

kubeplex::contexts! {
    pub enum Fleet { Control = "control", ClusterA = "cluster-a", ClusterB = "cluster-b" }
}

#[controller(
    crd = k8s_openapi::api::core::v1::ConfigMap,
    contexts = [Fleet::Control],
    owns(Deployment, contexts = [Fleet::ClusterA], namespaces = ["apps"]),
    owns(Deployment, contexts = [Fleet::ClusterA, Fleet::ClusterB], namespaces = ["web"]),
)]
struct Twice;

fn main() {}
