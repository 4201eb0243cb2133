//! `v2` of the custom resource: the same application, its workload and its placement apart. The API server
//! stores `v1`; the operator's conversion webhook ([`crate::conversion`]) converts between the two, so a user
//! reads and writes either.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{AppDeploymentStatus, Rollout};

/// An application to run as a Deployment in each target namespace of every child cluster (`v2`: `spec.image`
/// and `spec.replicas` of `v1` are `spec.workload`, `spec.namespaces` and `spec.rollout` are
/// `spec.placement`).
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "demo.kubeplex.dev",
    version = "v2",
    kind = "AppDeployment",
    namespaced,
    status = "AppDeploymentStatus",
    shortname = "appdep",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Image","type":"string","jsonPath":".spec.workload.image"}"#,
    printcolumn = r#"{"name":"Rollout","type":"string","jsonPath":".status.rollout.phase"}"#
)]
pub struct AppDeploymentSpec {
    /// What runs.
    pub workload: Workload,
    /// Where it runs, and how a changed image gets there; absent: every owned namespace, at once.
    #[serde(default, skip_serializing_if = "Placement::is_default")]
    pub placement: Placement,
}

/// What runs: the container image and how many replicas.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Workload {
    /// The container image: a reference without spaces.
    #[schemars(length(min = 1), regex(pattern = r"^[^\s]+$"))]
    pub image: String,
    /// Replicas per Deployment (each cluster and namespace runs a full set).
    #[schemars(range(min = 0))]
    pub replicas: i32,
}

/// Where the workload runs, and how a changed image reaches the clusters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Placement {
    /// Target namespaces in each child cluster, among those the operator owns; empty or absent: all of
    /// them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 16),
        inner(
            length(min = 1, max = 63),
            regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
        )
    )]
    pub namespaces: Vec<String>,
    /// A progressive rollout (`v1`'s `spec.rollout`); absent: every cluster gets a changed image at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,
}

impl Placement {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

impl From<super::AppDeploymentSpec> for AppDeploymentSpec {
    fn from(v1: super::AppDeploymentSpec) -> Self {
        let super::AppDeploymentSpec {
            image,
            replicas,
            namespaces,
            rollout,
        } = v1;
        Self {
            workload: Workload { image, replicas },
            placement: Placement {
                namespaces,
                rollout,
            },
        }
    }
}

impl From<AppDeploymentSpec> for super::AppDeploymentSpec {
    fn from(v2: AppDeploymentSpec) -> Self {
        let AppDeploymentSpec {
            workload: Workload { image, replicas },
            placement:
                Placement {
                    namespaces,
                    rollout,
                },
        } = v2;
        Self {
            image,
            replicas,
            namespaces,
            rollout,
        }
    }
}
