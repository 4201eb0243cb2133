use kubeplex::controller;

kubeplex::contexts! {
    pub enum Fleet { Control = "control", ClusterA = "cluster-a" }
}

pub struct NodeInfo;

#[controller(
    crd = k8s_openapi::api::core::v1::ConfigMap,
    contexts = [Fleet::Control],
    watches(NodeInfo, contexts = [Fleet::ClusterA]),
)]
struct NotAResource;

fn main() {}
