use kubeplex::controller;

kubeplex::contexts! {
    pub enum Fleet { Control = "control", ClusterA = "cluster-a" }
}

#[controller(
    crd = k8s_openapi::api::core::v1::ConfigMap,
    contexts = [Fleet::Control],
    watches(Nod, contexts = [Fleet::ClusterA]),
)]
struct UnknownKind;

fn main() {}
