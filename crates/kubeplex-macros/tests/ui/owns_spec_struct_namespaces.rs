// With `namespaces` given, a child's spec struct is still reported once, at the type.
use k8s_openapi::api::apps::v1::DeploymentSpec;
use kubeplex::controller;

#[controller(
    crd = k8s_openapi::api::core::v1::ConfigMap,
    contexts = ["control"],
    namespaces = ["crds"],
    owns(DeploymentSpec, contexts = ["cluster-a"], namespaces = ["apps"]),
)]
struct FanOut;

fn main() {}
