use kubeplex::controller;

#[controller(crd = k8s_openapi::api::core::v1::ConfigMap, contexts = ["control"], field_selector = "metadata.name")]
struct BadSelector;

fn main() {}
