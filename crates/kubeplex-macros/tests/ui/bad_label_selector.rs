use kubeplex::controller;

#[controller(crd = k8s_openapi::api::core::v1::ConfigMap, contexts = ["control"], label_selector = "app=web tier=db")]
struct BadSelector;

fn main() {}
