//! Unlinking a child that its policy spares — kept once no longer declared, or orphaned when its parent is
//! deleted — instead of deleting it: its link labels go (see `core/ownership.rs`), so that no watch or
//! list of the controller finds it again, neither this replica's nor a successor's orphan sweep, and it
//! stays in its cluster as it is.

use kube::Client;
use kube::api::{ApiResource, ObjectMeta, Patch, PatchParams};

use super::requests::api;
use crate::core::unlink_patch;

/// Unlinks `child`, only if it is still the object seen (same UID): `true` when done, `false` when it was
/// gone already. Written with a merge patch under the controller's name (`manager`): server-side apply of
/// the link alone would also drop every field the controller applied.
pub(in crate::engine) async fn unlink(
    client: Client,
    resource: &ApiResource,
    child: &ObjectMeta,
    manager: &str,
) -> Result<bool, kube::Error> {
    let api = api(client, resource, child.namespace.as_deref());
    let params = PatchParams {
        field_manager: Some(manager.to_owned()),
        ..PatchParams::default()
    };
    let patch = unlink_patch(child.uid.as_deref());
    match api
        .patch(
            child.name.as_deref().unwrap_or_default(),
            &params,
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests;
