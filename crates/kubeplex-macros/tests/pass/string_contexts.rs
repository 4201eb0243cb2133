//! Contexts named by string literals, no fleet declared.
use kube::CustomResource;
use kubeplex::{ContextName, Controller, controller};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "demo.kubeplex.dev",
    version = "v1",
    kind = "AppDeployment",
    namespaced
)]
pub struct AppDeploymentSpec {
    pub image: String,
}

#[controller(crd = AppDeployment, namespaces = ["crds"], contexts = ["control"])]
struct AppReconciler {
    #[allow(dead_code)]
    registry: String,
}

#[test]
fn builds_its_plan() {
    let plan = AppReconciler::plan();
    assert_eq!(plan.name(), "app-reconciler");
    assert_eq!(plan.contexts(), [ContextName::new("control")]);
    assert_eq!(plan.namespaces(), ["crds"]);
}
