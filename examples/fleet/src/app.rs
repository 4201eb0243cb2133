//! The custom resource: an application to run in every child cluster.

pub mod v2;

use std::collections::BTreeMap;

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
    printcolumn = r#"{"name":"Image","type":"string","jsonPath":".spec.image"}"#,
    printcolumn = r#"{"name":"Rollout","type":"string","jsonPath":".status.rollout.phase"}"#
)]
pub struct AppDeploymentSpec {
    /// The container image: a reference without spaces.
    #[schemars(length(min = 1), regex(pattern = r"^[^\s]+$"))]
    pub image: String,
    /// Replicas per Deployment (each cluster and namespace runs a full set).
    #[schemars(range(min = 0))]
    pub replicas: i32,
    /// Target namespaces in each child cluster, among those the operator owns (`fleet run
    /// --child-namespaces`, by default `namespace-a` and `namespace-b`); empty or absent: all of them.
    /// Which namespaces the operator owns is known only when it runs, so the schema checks the names and
    /// the operator checks the rest (a failed reconcile, in the status and an Event).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 16),
        inner(
            length(min = 1, max = 63),
            regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
        )
    )]
    pub namespaces: Vec<String>,
    /// How a changed image reaches the clusters; absent: every cluster gets it at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,
}

/// A progressive rollout: a changed image goes to one cluster at a time, in `order`, each only once every
/// Deployment of this `AppDeployment` in the clusters before it is `Healthy` with the new image.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    /// How the clusters take turns; the operator's webhook writes in the one there is when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<RolloutStrategy>,
    /// The clusters first in line, by name (a context or a member of the fleet); the clusters not named
    /// follow in the operator's order (its contexts, then its members). A name the operator does not
    /// deploy to is passed over.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(min = 1, max = 253)))]
    pub order: Vec<String>,
}

/// How the clusters take turns in a rollout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RolloutStrategy {
    /// One cluster at a time, the next once the previous runs the new image healthily.
    OneClusterAtATime,
}

impl AppDeploymentSpec {
    /// The namespaces this spec targets in each child cluster, given those the operator `owns`.
    pub fn targets<'a>(&'a self, owns: &[&'a str]) -> Vec<&'a str> {
        if self.namespaces.is_empty() {
            owns.to_vec()
        } else {
            self.namespaces.iter().map(String::as_str).collect()
        }
    }

    /// Why this spec cannot be fulfilled by an operator that `owns` these child namespaces, if it cannot:
    /// the CRD schema's rules (for objects stored before the schema had them, or written while it was not
    /// installed), and that every target namespace is one the operator owns.
    pub fn problem(&self, owns: &[&str]) -> Option<String> {
        if self.image.is_empty() || self.image.contains(char::is_whitespace) {
            return Some(format!(
                "image {:?} is not an image reference (empty, or with spaces)",
                self.image
            ));
        }
        if self.replicas < 0 {
            return Some(format!(
                "replicas is {}; it must be 0 or more",
                self.replicas
            ));
        }
        let unknown: Vec<&str> = self
            .namespaces
            .iter()
            .map(String::as_str)
            .filter(|n| !owns.contains(n))
            .collect();
        if !unknown.is_empty() {
            return Some(format!(
                "namespaces {} are not owned by this operator (it owns {})",
                unknown.join(", "),
                owns.join(", ")
            ));
        }
        None
    }
}

/// What the operator reports: kubeplex's per-cluster status (each child cluster's state and children, and
/// an overall `Ready` condition).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AppDeploymentStatus {
    /// Per cluster, and the `Ready` condition.
    #[serde(flatten)]
    pub fleet: kubeplex::FleetStatus,
    /// Where the rollout stands, with `spec.rollout` (written by the reconcile, beside kubeplex's part).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutStatus>,
}

/// Where a progressive rollout stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// The image being rolled out (the spec's).
    pub image: String,
    /// `Progressing`, `Halted` or `Complete`.
    pub phase: RolloutPhase,
    /// The cluster the rollout waits for, or is halted at; absent once complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Where and why, e.g. `halted at cluster-b: namespace-a/web Degraded: 0/3 replicas available`.
    pub message: String,
    /// The image each cluster was last given, by cluster: what a cluster the rollout has not reached keeps,
    /// whatever its cache shows (written before the image is applied).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub clusters: BTreeMap<String, String>,
}

/// The phase of a progressive rollout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RolloutPhase {
    /// A cluster has the image and is not `Healthy` with it yet; the clusters after it wait.
    Progressing,
    /// A cluster that has the image is `Degraded`; the clusters after it wait until it recovers.
    Halted,
    /// Every cluster has been given the image (the `Ready` condition says whether it runs).
    Complete,
}

impl RolloutPhase {
    /// The phase as the status writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Progressing => "Progressing",
            Self::Halted => "Halted",
            Self::Complete => "Complete",
        }
    }
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt as _;
    use serde_json::Value;

    use super::*;

    /// The string formats the API server knows, written as it compares them: without dashes
    /// (k8s.io/apiextensions-apiserver, `pkg/apiserver/validation/formats.go`, as of Kubernetes 1.34).
    const STRING_FORMATS: [&str; 26] = [
        "bsonobjectid",
        "uri",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "cidr",
        "mac",
        "uuid",
        "uuid3",
        "uuid4",
        "uuid5",
        "isbn",
        "isbn10",
        "isbn13",
        "creditcard",
        "ssn",
        "hexcolor",
        "rgbcolor",
        "byte",
        "password",
        "date",
        "duration",
        "datetime",
        "k8sshortname",
        "k8slongname",
    ];

    /// Every `format` under `value`, with its schema's `type`.
    fn formats(value: &Value, found: &mut Vec<(Option<String>, String)>) {
        match value {
            Value::Object(object) => {
                if let Some(Value::String(format)) = object.get("format") {
                    let kind = object.get("type").and_then(Value::as_str).map(String::from);
                    found.push((kind, format.clone()));
                }
                object.values().for_each(|v| formats(v, found));
            }
            Value::Array(items) => items.iter().for_each(|v| formats(v, found)),
            _ => {}
        }
    }

    /// What `kube::CustomResourceExt::crd` gives is installed as it is (what `fleet crd` prints): the API
    /// server warns about a `format` it does not know (`unrecognized format "uint32"`, which schemars
    /// writes for a `u32`), and there is none. kubeplex's status counts children as `int32`.
    #[test]
    fn the_crd_has_only_formats_the_api_server_knows() {
        let mut found = Vec::new();
        formats(
            &serde_json::to_value(AppDeployment::crd()).unwrap(),
            &mut found,
        );
        assert!(!found.is_empty(), "replicas has a format");
        for (kind, format) in found {
            let known = match kind.as_deref() {
                Some("integer") => ["int32", "int64"].contains(&format.as_str()),
                Some("number") => ["float", "double"].contains(&format.as_str()),
                _ => STRING_FORMATS.contains(&format.replace('-', "").as_str()),
            };
            assert!(known, "{kind:?} with format {format:?}");
        }
    }
}
