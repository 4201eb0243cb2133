//! What kubeplex reads of a ClusterProfile (`multicluster.x-k8s.io/v1alpha1`): its `ControlPlaneHealthy`
//! condition and the access providers its status offers.

use std::collections::BTreeMap;

use kube::config::Cluster;
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde::Deserialize;

/// The condition a profile joins on.
pub(super) const CONTROL_PLANE_HEALTHY: &str = "ControlPlaneHealthy";

/// The ClusterProfile resource.
pub(super) fn resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("multicluster.x-k8s.io", "v1alpha1", "ClusterProfile");
    ApiResource::from_gvk_with_plural(&gvk, "clusterprofiles")
}

/// The part of a ClusterProfile's status kubeplex reads.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    #[serde(default)]
    conditions: Vec<Condition>,
    #[serde(default)]
    access_providers: Vec<Offer>,
    /// Deprecated in the API for `accessProviders`, still read.
    #[serde(default)]
    credential_providers: Vec<Offer>,
}

#[derive(Debug, Deserialize)]
struct Condition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Offer {
    name: String,
    #[serde(default)]
    cluster: Cluster,
}

/// The access providers a profile offers, by name: `accessProviders` winning over the deprecated
/// `credentialProviders` on a name both have.
#[derive(Debug, Default)]
pub(super) struct Offered(BTreeMap<String, Cluster>);

impl Offered {
    pub(super) fn get(&self, name: &str) -> Option<&Cluster> {
        self.0.get(name)
    }

    pub(super) fn names(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

/// A ClusterProfile as kubeplex reads it.
#[derive(Debug)]
pub(super) struct Profile {
    /// `None` when its control plane is healthy; else why the profile is not (to report).
    pub(super) unhealthy: Option<String>,
    pub(super) offered: Offered,
}

impl Profile {
    /// Reads `object`'s status; a status kubeplex cannot read is a reason, without its text.
    pub(super) fn of(object: &DynamicObject) -> Result<Self, String> {
        let status = match object.data.get("status") {
            None | Some(serde_json::Value::Null) => Status::default(),
            Some(value) => Status::deserialize(value)
                .map_err(|_| "its status is not a ClusterProfile's status".to_owned())?,
        };
        let healthy = status
            .conditions
            .iter()
            .find(|c| c.type_ == CONTROL_PLANE_HEALTHY);
        let unhealthy = match healthy {
            Some(c) if c.status == "True" => None,
            Some(c) => {
                let mut reason = format!("its {CONTROL_PLANE_HEALTHY} condition is {}", c.status);
                if let Some(why) = c.reason.as_deref().filter(|r| !r.is_empty()) {
                    reason += &format!(" ({why}");
                    if let Some(message) = c.message.as_deref().filter(|m| !m.is_empty()) {
                        reason += &format!(": {message}");
                    }
                    reason += ")";
                }
                Some(reason)
            }
            None => Some(format!("it has no {CONTROL_PLANE_HEALTHY} condition yet")),
        };
        let mut offered = BTreeMap::new();
        let offers = status.credential_providers.into_iter();
        for offer in offers.chain(status.access_providers) {
            offered.insert(offer.name, offer.cluster);
        }
        Ok(Self {
            unhealthy,
            offered: Offered(offered),
        })
    }
}
