use kube::CustomResource;
use kubeplex::controller;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[kube(group = "demo.kubeplex.dev", version = "v1", kind = "AppDeployment", namespaced)]
pub struct AppDeploymentSpec {
    pub image: String,
}

#[controller(crd = AppDeploymentSpec, contexts = ["control"])]
struct AppDeployer;

fn main() {}
