//! The custom resource: an application to run in every child cluster.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An application to run as a Deployment in each target namespace of every child cluster.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "demo.kubeplex.dev",
    version = "v1",
    kind = "AppDeployment",
    namespaced,
    status = "AppDeploymentStatus",
    shortname = "appdep",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Image","type":"string","jsonPath":".spec.image"}"#
)]
pub struct AppDeploymentSpec {
    /// The container image.
    pub image: String,
    /// Replicas per Deployment (each cluster and namespace runs a full set).
    pub replicas: i32,
    /// Target namespaces in each child cluster: some of `namespace-a`, `namespace-b` (default both).
    #[serde(default = "default_namespaces")]
    pub namespaces: Vec<String>,
}

fn default_namespaces() -> Vec<String> {
    crate::CHILD_NAMESPACES.map(String::from).to_vec()
}

/// What the operator reports: kubeplex's per-cluster status (each child cluster's state and children, and
/// an overall `Ready` condition).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AppDeploymentStatus {
    /// Per cluster, and the `Ready` condition.
    #[serde(flatten)]
    pub fleet: kubeplex::FleetStatus,
}
