use kubeplex::controller;

#[controller(
    crd = k8s_openapi::api::core::v1::ConfigMap,
    contexts = ["control"],
    concurrency_per_cluster = 0
)]
struct Zero;

fn main() {}
