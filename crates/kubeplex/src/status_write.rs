//! Writing kubeplex's part of a parent's status: server-side apply on the status subresource, with the
//! controller as field manager, so that only kubeplex's own fields (its clusters and its `Ready` condition)
//! are written and other writers' conditions stay; and only when that part changed, so that the write never
//! feeds back into another reconcile.

use std::collections::BTreeMap;

use kube::api::{Patch, PatchParams};
use kube::{Resource, ResourceExt};

use crate::context::Context;
use crate::controller::Reconcile;
use crate::engine::{Engine, Primary};
use crate::error::chain;
use crate::status::{ContextOutcome, FleetStatus, now};

impl<R: Reconcile> Engine<R> {
    /// Records the outcome of syncing (or removing) the children per context.
    pub(crate) async fn write_status(
        &self,
        object: &Primary<R>,
        context: R::Context,
        outcomes: &BTreeMap<String, ContextOutcome>,
    ) {
        let previous = owned_status(object);
        let status =
            FleetStatus::from_outcomes(&previous, outcomes, object.meta().generation, &now());
        self.apply_status(object, context, &previous, status).await;
    }

    /// Records a failed reconcile: `Ready=False` with the error, the clusters as they were.
    pub(crate) async fn write_failure(
        &self,
        object: &Primary<R>,
        context: R::Context,
        message: &str,
    ) {
        let previous = owned_status(object);
        let status =
            FleetStatus::reconcile_failed(&previous, message, object.meta().generation, &now());
        self.apply_status(object, context, &previous, status).await;
    }

    async fn apply_status(
        &self,
        object: &Primary<R>,
        context: R::Context,
        previous: &FleetStatus,
        status: FleetStatus,
    ) {
        if &status == previous {
            return;
        }
        let patch = serde_json::json!({
            "apiVersion": Primary::<R>::api_version(&()),
            "kind": Primary::<R>::kind(&()),
            "status": status,
        });
        // Forced: kubeplex owns these fields; an earlier version of it wrote them with a merge patch.
        let params = PatchParams::apply(self.plan.name()).force();
        let written = match self.parent_api(object, context) {
            Ok(api) => api
                .patch_status(&object.name_any(), &params, &Patch::Apply(&patch))
                .await
                .map(drop),
            Err(error) => Err(error),
        };
        if let Err(error) = written {
            tracing::warn!(context = %context.name(), error = %chain(&error), "writing the per-cluster status failed");
        }
    }
}

/// kubeplex's part of the object's current status.
fn owned_status<K: serde::Serialize>(object: &K) -> FleetStatus {
    let value = serde_json::to_value(object).ok();
    FleetStatus::owned_part(value.as_ref().and_then(|v| v.get("status")))
}
