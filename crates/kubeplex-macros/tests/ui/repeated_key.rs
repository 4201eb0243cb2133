use kubeplex::controller;

#[controller(crd = k8s_openapi::api::core::v1::ConfigMap, contexts = ["control"], crd = k8s_openapi::api::core::v1::ConfigMap)]
struct Repeated;

fn main() {}
