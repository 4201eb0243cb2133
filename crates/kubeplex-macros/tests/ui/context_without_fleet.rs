use kubeplex::controller;
kubeplex::contexts! {
    pub enum Fleet {
        Control = "control",
        ClusterA = "cluster-a",
        ClusterB = "cluster-b",
    }
}

use Fleet::Control;

#[controller(crd = k8s_openapi::api::core::v1::ConfigMap, contexts = [Control])]
struct Bare;

fn main() {}
