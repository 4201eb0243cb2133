// A private resource type under a public controller: reported at `crd = Widget`, with the fix.
use kube::CustomResource;
use kubeplex::controller;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[kube(group = "demo.kubeplex.dev", version = "v1", kind = "Widget", namespaced)]
struct WidgetSpec {
    size: u32,
}

#[controller(crd = Widget, contexts = ["control"])]
pub struct WidgetController;

fn main() {}
