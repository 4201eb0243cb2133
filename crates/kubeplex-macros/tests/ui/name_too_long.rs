use kubeplex::controller;

#[controller(
    crd = k8s_openapi::api::core::v1::ConfigMap,
    contexts = ["control"],
    name = "configmap-fan-out-to-every-cluster-of-the-fleet-in-every-namespace",
)]
struct FanOut;

fn main() {}
