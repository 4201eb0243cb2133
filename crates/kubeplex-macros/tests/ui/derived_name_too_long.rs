use kubeplex::controller;

#[controller(crd = k8s_openapi::api::core::v1::ConfigMap, contexts = ["control"])]
struct ConfigMapFanOutToEveryClusterOfTheFleetInEveryNamespaceReconciler;

fn main() {}
