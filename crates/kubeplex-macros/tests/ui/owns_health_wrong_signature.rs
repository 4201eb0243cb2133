use kubeplex::controller;

kubeplex::contexts! {
    pub enum Fleet { Control = "control", ClusterA = "cluster-a" }
}

fn web(_: &kubeplex::health::Projection) -> bool {
    true
}

#[controller(
    crd = k8s_openapi::api::core::v1::ConfigMap,
    contexts = [Fleet::Control],
    owns(k8s_openapi::api::core::v1::Secret, contexts = [Fleet::ClusterA], health = web),
)]
struct WrongSignature;

fn main() {}
