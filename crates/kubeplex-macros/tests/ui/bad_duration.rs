use kubeplex::controller;

#[controller(crd = k8s_openapi::api::core::v1::ConfigMap, contexts = ["control"], requeue_after = "5 minutes")]
struct BadDuration;

fn main() {}
