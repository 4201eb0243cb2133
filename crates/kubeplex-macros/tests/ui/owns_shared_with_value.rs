use kubeplex::controller;

kubeplex::contexts! {
    pub enum Fleet { Control = "control", ClusterA = "cluster-a" }
}

#[controller(
    crd = k8s_openapi::api::core::v1::ConfigMap,
    contexts = [Fleet::Control],
    owns(k8s_openapi::api::apps::v1::Deployment, shared = true, contexts = [Fleet::ClusterA]),
)]
struct SharedWithValue;

fn main() {}
