use kubeplex::controller;

kubeplex::contexts! {
    pub enum Fleet { Control = "control", ClusterA = "cluster-a" }
}

fn parents_of(_: &k8s_openapi::api::core::v1::Node) -> Vec<String> {
    Vec::new()
}

#[controller(
    crd = k8s_openapi::api::core::v1::ConfigMap,
    contexts = [Fleet::Control],
    watches(k8s_openapi::api::core::v1::Node, contexts = [Fleet::ClusterA], map = parents_of),
)]
struct WrongSignature;

fn main() {}
