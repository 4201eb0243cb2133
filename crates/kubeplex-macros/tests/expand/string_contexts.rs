// Contexts named by string literals, no fleet: `type Context = ContextName`.
#[controller(crd = AppDeployment, namespaces = ["crds"], contexts = ["control"])]
struct AppReconciler {
    image_registry: String,
}
