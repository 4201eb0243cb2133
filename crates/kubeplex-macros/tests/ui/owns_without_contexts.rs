use kubeplex::controller;

#[controller(crd = k8s_openapi::api::core::v1::ConfigMap, contexts = ["control"], owns(k8s_openapi::api::apps::v1::Deployment))]
struct NoChildContexts;

fn main() {}
