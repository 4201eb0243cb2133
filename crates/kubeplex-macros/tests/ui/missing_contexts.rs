use kubeplex::controller;

#[controller(crd = k8s_openapi::api::core::v1::ConfigMap)]
struct NoContexts;

fn main() {}
