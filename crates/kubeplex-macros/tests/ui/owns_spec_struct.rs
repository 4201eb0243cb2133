use k8s_openapi::api::apps::v1::DeploymentSpec;
use kubeplex::controller;

#[controller(
    crd = k8s_openapi::api::core::v1::ConfigMap,
    contexts = ["control"],
    owns(DeploymentSpec, contexts = ["cluster-a"]),
)]
struct FanOut;

fn main() {}
