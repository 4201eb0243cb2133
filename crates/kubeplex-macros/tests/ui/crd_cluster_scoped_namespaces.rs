use kubeplex::controller;

// A cluster-scoped kind has no namespace: watching it in `namespaces` would never see an object.
#[controller(crd = k8s_openapi::api::core::v1::Namespace, contexts = ["control"], namespaces = ["crds"])]
struct NamespaceWatcher;

fn main() {}
