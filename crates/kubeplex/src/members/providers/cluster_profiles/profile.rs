//! What kubeplex reads of a ClusterProfile: the version it reads it in, the member it belongs to, the
//! conditions its join waits for and the access providers its status offers.

use std::collections::BTreeMap;

use kube::ResourceExt;
use kube::config::Cluster;
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde::Deserialize;

use super::conditions::{Condition, JoinConditions};

/// The Cluster Inventory API's group.
pub(super) const GROUP: &str = "multicluster.x-k8s.io";
/// The label that gives profiles of one member cluster (from several cluster managers) one value.
pub(super) const MEMBER_ID_LABEL: &str = "multicluster.x-k8s.io/inventory-member-id";

/// A ClusterProfile version kubeplex reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Version {
    /// Offers access in `accessProviders` and the deprecated `credentialProviders`.
    V1alpha1,
    /// Offers access in `accessProviders` only.
    V1alpha2,
}

impl Version {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::V1alpha1 => "v1alpha1",
            Self::V1alpha2 => "v1alpha2",
        }
    }

    /// The newest of the `served` versions kubeplex reads.
    pub(super) fn newest_of<'a>(served: impl IntoIterator<Item = &'a str>) -> Option<Self> {
        let read = |version: &str| match version {
            "v1alpha1" => Some(Self::V1alpha1),
            "v1alpha2" => Some(Self::V1alpha2),
            _ => None,
        };
        served.into_iter().filter_map(read).max()
    }
}

/// The ClusterProfile resource in `version`.
pub(super) fn resource(version: Version) -> ApiResource {
    let gvk = GroupVersionKind::gvk(GROUP, version.as_str(), "ClusterProfile");
    ApiResource::from_gvk_with_plural(&gvk, "clusterprofiles")
}

/// Which member a profile gives: the one of its `inventory-member-id` label, or its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum MemberKey {
    /// Every profile with this label value is one member.
    Id(String),
    /// The profile, alone, is one member.
    Profile(String),
}

impl MemberKey {
    pub(super) fn of(object: &DynamicObject) -> Self {
        match object
            .labels()
            .get(MEMBER_ID_LABEL)
            .filter(|id| !id.is_empty())
        {
            Some(id) => Self::Id(id.clone()),
            None => Self::Profile(object.name_any()),
        }
    }

    /// What the member is named after.
    pub(super) fn value(&self) -> &str {
        match self {
            Self::Id(value) | Self::Profile(value) => value,
        }
    }
}

/// The part of a ClusterProfile's status kubeplex reads.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    #[serde(default)]
    conditions: Vec<Condition>,
    #[serde(default)]
    access_providers: Vec<Offer>,
    /// v1alpha1 only: deprecated there for `accessProviders`, gone from v1alpha2.
    #[serde(default)]
    credential_providers: Vec<Offer>,
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
    /// `None` when its conditions let it join; else why they do not (to report).
    pub(super) unhealthy: Option<String>,
    pub(super) offered: Offered,
}

impl Profile {
    /// Reads `object`, served in `version`, with `conditions`; a status kubeplex cannot read is a reason,
    /// without its text.
    pub(super) fn of(
        object: &DynamicObject,
        version: Version,
        conditions: &JoinConditions,
    ) -> Result<Self, String> {
        let status = match object.data.get("status") {
            None | Some(serde_json::Value::Null) => Status::default(),
            Some(value) => Status::deserialize(value)
                .map_err(|_| "its status is not a ClusterProfile's status".to_owned())?,
        };
        let unhealthy = conditions.unmet(&status.conditions);
        let mut offered = BTreeMap::new();
        let deprecated = match version {
            Version::V1alpha1 => status.credential_providers,
            Version::V1alpha2 => Vec::new(),
        };
        for offer in deprecated.into_iter().chain(status.access_providers) {
            offered.insert(offer.name, offer.cluster);
        }
        Ok(Self {
            unhealthy,
            offered: Offered(offered),
        })
    }
}
