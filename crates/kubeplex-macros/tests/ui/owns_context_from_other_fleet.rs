use kubeplex::controller;
kubeplex::contexts! {
    pub enum Fleet {
        Control = "control",
        ClusterA = "cluster-a",
        ClusterB = "cluster-b",
    }
}

kubeplex::contexts! {
    pub enum Staging {
        Control = "staging-control",
    }
}

#[controller(
    crd = k8s_openapi::api::core::v1::ConfigMap,
    contexts = [Fleet::Control],
    owns(k8s_openapi::api::apps::v1::Deployment, contexts = [Staging::Control]),
)]
struct OtherFleet;

fn main() {}
