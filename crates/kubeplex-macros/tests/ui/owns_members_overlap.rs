use k8s_openapi::api::apps::v1::Deployment;
use kubeplex::controller;

kubeplex::contexts! {
    pub enum Fleet { Control = "control", ClusterA = "cluster-a", ClusterB = "cluster-b" }
}

#[controller(
    crd = k8s_openapi::api::core::v1::ConfigMap,
    contexts = [Fleet::Control],
    owns(Deployment, members, contexts = [Fleet::ClusterA], namespaces = ["apps"]),
    owns(Deployment, members, contexts = [Fleet::ClusterB], namespaces = ["web"]),
)]
struct TwiceInMembers;

fn main() {}
