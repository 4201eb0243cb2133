// With `namespaces` given, the spec struct is still reported once, at the type (not at `namespaces`).
use kube::CustomResource;
use kubeplex::controller;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[kube(group = "demo.kubeplex.dev", version = "v1", kind = "AppDeployment", namespaced)]
pub struct AppDeploymentSpec {
    pub image: String,
}

#[controller(crd = AppDeploymentSpec, contexts = ["control"], namespaces = ["crds"])]
struct AppDeployer;

fn main() {}
