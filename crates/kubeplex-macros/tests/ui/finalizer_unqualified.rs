use kubeplex::controller;

#[controller(crd = k8s_openapi::api::core::v1::ConfigMap, contexts = ["control"], finalizer = "cleanup")]
struct Unqualified;

fn main() {}
