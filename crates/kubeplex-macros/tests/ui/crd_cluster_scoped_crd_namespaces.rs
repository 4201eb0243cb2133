use kube::CustomResource;
use kubeplex::controller;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// A custom resource without `namespaced` is cluster-scoped.
#[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[kube(group = "demo.kubeplex.dev", version = "v1", kind = "Tenant")]
pub struct TenantSpec {
    pub owner: String,
}

#[controller(crd = Tenant, contexts = ["control"], namespaces = ["tenants"])]
struct Tenants;

fn main() {}
