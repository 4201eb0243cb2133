use kubeplex::controller;
kubeplex::contexts! {
    pub enum Fleet {
        Control = "control",
        ClusterA = "cluster-a",
        ClusterB = "cluster-b",
    }
}

#[controller(
    crd = k8s_openapi::api::core::v1::ConfigMap,
    fleet = Fleet,
    contexts = ["control"],
    owns(k8s_openapi::api::apps::v1::Deployment, contexts = ["clustr-a"]),
)]
struct NotDeclared;

fn main() {}
