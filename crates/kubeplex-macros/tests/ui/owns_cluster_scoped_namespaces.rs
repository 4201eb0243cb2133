use kubeplex::controller;

#[controller(
    crd = k8s_openapi::api::core::v1::ConfigMap,
    contexts = ["control"],
    owns(k8s_openapi::api::rbac::v1::ClusterRole, contexts = ["cluster-a"], namespaces = ["apps"]),
)]
struct RoleFanOut;

fn main() {}
