//! One child request: the `Api` it goes through, how its child is named in messages, and what a failed
//! one means for the cluster's outcome.

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};

use crate::core::chain;
use crate::core::{ClusterOutcome, ClusterState};
use crate::core::{is_transport, transport};

pub(crate) fn api(
    client: Client,
    resource: &ApiResource,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    match namespace {
        Some(namespace) => Api::namespaced_with(client, namespace, resource),
        None => Api::all_with(client, resource),
    }
}

/// An outcome for a failed request: unreachable when the server could not be reached, fenced when this
/// replica's own fence refused the write, else failed (the cluster's identity refusing it included). Its message says what failed and why; the key
/// it is kept under names the cluster.
pub(crate) fn failure(error: &kube::Error, what: &str) -> ClusterOutcome {
    let fenced = crate::core::fenced(error);
    let (state, why) = if let Some(refusal) = fenced {
        (ClusterState::Failed, refusal.to_owned())
    } else if let Some(refusal) = crate::core::identity_refusal(error) {
        (ClusterState::Failed, refusal.to_owned())
    } else if is_transport(error) {
        (ClusterState::Unreachable, transport(error))
    } else {
        (ClusterState::Failed, chain(error))
    };
    ClusterOutcome {
        state,
        children: 0,
        message: Some(format!("{what}: {why}")),
        fenced,
    }
}

/// `Kind.group/version`, as the metrics label kinds.
pub(crate) fn kind_of(resource: &ApiResource) -> String {
    crate::core::format_kind(&resource.kind, &resource.group, &resource.version)
}

/// How a child is named in messages: `Deployment namespace-a/web`.
pub(crate) fn place(kind: &str, namespace: Option<&str>, name: &str) -> String {
    let namespace = namespace.map(|ns| format!("{ns}/")).unwrap_or_default();
    format!("{kind} {namespace}{name}")
}
