use kubeplex::controller;

kubeplex::contexts! {
    pub enum Fleet { Control = "control", ClusterA = "cluster-a" }
}

#[controller(
    crd = k8s_openapi::api::core::v1::ConfigMap,
    contexts = [Fleet::Control],
    watches(k8s_openapi::api::core::v1::Node, label_selector = "tier=web"),
)]
struct Nowhere;

fn main() {}
