use kubeplex::controller;

#[controller(crd = k8s_openapi::api::core::v1::ConfigMap, contexts = ["control"], namespaces = ["Team_A"])]
struct BadNamespace;

fn main() {}
