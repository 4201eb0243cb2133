//! A child a reconcile asked for, not yet applied, and the children of one reconcile by where they go.

use std::collections::BTreeMap;

use kube::api::ApiResource;

/// A child the reconcile asked for, not yet applied (where it goes is the key it is kept under).
#[derive(Clone, Debug)]
pub(crate) struct DesiredChild {
    pub(crate) resource: ApiResource,
    pub(crate) namespace: Option<String>,
    pub(crate) name: String,
    pub(crate) object: serde_json::Value,
}

/// The children a reconcile asked for, by the cluster they go to, each in the order declared:
/// split once, as they are declared, so that each cluster's sync takes its own.
pub(crate) type DesiredChildren = BTreeMap<String, Vec<DesiredChild>>;
