use kubeplex::controller;

#[controller(
    crd = k8s_openapi::api::core::v1::ConfigMap,
    contexts = ["control"],
    abandon_unreachable_after = "10m",
    abandon_terminating_after = "10m",
)]
struct NoChildren;

fn main() {}
