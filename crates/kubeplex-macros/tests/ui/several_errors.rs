use kubeplex::controller;

#[controller(
    crd = k8s_openapi::api::core::v1::ConfigMap,
    contexts = ["control", "control"],
    namespaces = ["Crds"],
    concurrency = 0,
    debounce = "soon",
    finalizer = "cleanup",
    resync = "1h",
)]
struct ManyMistakes;

fn main() {}
