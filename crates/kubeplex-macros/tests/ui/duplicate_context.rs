use kubeplex::controller;
kubeplex::contexts! {
    pub enum Fleet {
        Control = "control",
        ClusterA = "cluster-a",
        ClusterB = "cluster-b",
    }
}

#[controller(crd = k8s_openapi::api::core::v1::ConfigMap, contexts = [Fleet::Control, Fleet::ClusterA, Fleet::Control])]
struct DuplicateContext;

fn main() {}
