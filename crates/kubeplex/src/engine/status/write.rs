//! Writing kubeplex's part of a parent's status: server-side apply on the status subresource, with the
//! controller as field manager, so that only kubeplex's own fields (its clusters and its `Ready` condition)
//! are written and other writers' conditions stay; and only when that part changed, so that the write never
//! feeds back into another reconcile.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use kube::api::{Patch, PatchParams};
use kube::{Resource, ResourceExt};
use tracing::Instrument;

use crate::controller::{DynReconcile, OwnStatus};
use crate::core::chain;
use crate::core::{ClusterHealth, ClusterOutcome, FleetStatus, now};
use crate::engine::engine::{Engine, ParentWrite, Primary};
use crate::engine::status::draft::StatusDraft;

impl<R: DynReconcile> Engine<R> {
    /// Records the outcome of removing the children per cluster, over `previous` (kubeplex's part of the
    /// status as this reconcile found it, see [`Engine::previous_status`]), behind `shard`'s fence as well.
    pub(crate) async fn write_status(
        &self,
        (object, context, shard): ParentWrite<'_, R>,
        previous: &FleetStatus,
        outcomes: &BTreeMap<String, ClusterOutcome>,
        health: &BTreeMap<String, ClusterHealth>,
    ) {
        let generation = object.meta().generation;
        let mut status = FleetStatus::from_outcomes(previous, outcomes, health, generation, &now());
        self.identify(&mut status);
        self.apply_status((object, context, shard), previous, status, None, false)
            .await;
    }

    /// Writes the reconcile's `draft` as it stands (`interim`: the places still working told as not
    /// answering yet) over what its last write left, behind `shard`'s fence as well.
    pub(crate) async fn write_draft(
        &self,
        write: ParentWrite<'_, R>,
        draft: &mut StatusDraft,
        interim: bool,
    ) {
        let (mut status, previous) = draft.status(interim, &now());
        self.identify(&mut status);
        let own = draft.own_to_write().cloned();
        if self
            .apply_status(write, previous, status.clone(), draft.own(), own.is_some())
            .await
        {
            draft.wrote(status);
        }
    }

    /// Records a failed reconcile: `Ready=False` with the error, the clusters as they were.
    pub(crate) async fn write_failure(&self, write: ParentWrite<'_, R>, message: &str) {
        let object = write.0;
        let previous = self.previous_status(object);
        let mut status =
            FleetStatus::reconcile_failed(&previous, message, object.meta().generation, &now());
        self.identify(&mut status);
        self.apply_status(write, &previous, status, None, false)
            .await;
    }

    /// Writes a reconcile's own status fields alone, for a controller without children (kubeplex writes
    /// no part of its status), unless they are in place.
    pub(crate) async fn write_own(&self, write: ParentWrite<'_, R>, own: &OwnStatus) {
        let (previous, before) = self.previous(write.0, Some(own));
        let changed = before.as_ref() != Some(own);
        self.apply_status(write, &previous, previous.clone(), Some(own), changed)
            .await;
    }

    /// Applies `status`, with the reconcile's `own` fields beside it, unless both are in place (`status` is
    /// `previous`, and `own` not `own_changed`); whether they are in place (written, or unchanged).
    /// Names each cluster's identity in `status`, as far as it is known.
    fn identify(&self, status: &mut FleetStatus) {
        let identities = self.runtime.readiness.identities();
        for (name, cluster) in &mut status.clusters {
            cluster.identity = identities.of(name);
        }
    }

    async fn apply_status(
        &self,
        (object, context, shard): ParentWrite<'_, R>,
        previous: &FleetStatus,
        status: FleetStatus,
        own: Option<&OwnStatus>,
        own_changed: bool,
    ) -> bool {
        if (&status == previous && !own_changed) || self.no_status.load(Ordering::Relaxed) {
            return true;
        }
        let mut body = serde_json::to_value(&status).unwrap_or_default();
        if let (Some(body), Some(own)) = (body.as_object_mut(), own) {
            body.extend(own.clone());
        }
        let patch = serde_json::json!({
            "apiVersion": Primary::<R>::api_version(&()),
            "kind": Primary::<R>::kind(&()),
            "status": body,
        });
        // Forced: kubeplex owns these fields; an earlier version of it wrote them with a merge patch.
        let params = PatchParams::apply(self.plan.name()).force();
        let span = tracing::info_span!("status_write", clusters = status.clusters.len());
        let api = match self.parent_api(object, context, shard) {
            Ok(api) => api,
            Err(error) => {
                tracing::warn!(cluster = %context.name(), error = %chain(&error), "writing the per-cluster status failed");
                return false;
            }
        };
        let written = api
            .patch_status(&object.name_any(), &params, &Patch::Apply(&patch))
            .instrument(span.clone())
            .await
            .map(|written| written.resource_version());
        span.in_scope(|| match written {
            Err(kube::Error::Api(status))
                if status.code == 404
                    && status
                        .message
                        .contains("could not find the requested resource") =>
            {
                // A kind without a status subresource (a ConfigMap, a CRD without `status`): said once.
                if !self.no_status.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        controller = %self.plan.name(),
                        kind = %self.parent_kind,
                        "the parent kind has no status subresource: kubeplex writes no per-cluster status"
                    );
                }
                false
            }
            Err(error) => {
                tracing::warn!(cluster = %context.name(), error = %chain(&error), "writing the per-cluster status failed");
                false
            }
            Ok(version) => {
                if let Some(own) = own {
                    self.written_own.record(object, version.as_deref(), own.clone());
                }
                self.written_status
                    .record(object, version.as_deref(), status);
                true
            }
        })
    }

    /// kubeplex's part of the object's status: as the cached `object` has it, or as this controller last
    /// wrote it when the cache does not show that write yet. Read once per reconcile (it serializes the
    /// object), and handed to the writes and the Events that compare with it.
    pub(crate) fn previous_status(&self, object: &Primary<R>) -> FleetStatus {
        self.previous(object, None).0
    }

    /// [`previous_status`](Self::previous_status), and the object's current values of the fields in `own`
    /// the same way (this controller's last write of them while the cache does not show it); the object is
    /// serialized once, and only when a memo does not answer.
    pub(crate) fn previous(
        &self,
        object: &Primary<R>,
        own: Option<&OwnStatus>,
    ) -> (FleetStatus, Option<OwnStatus>) {
        let fleet = self.written_status.newer_than(object);
        let own_written = own.and_then(|_| self.written_own.newer_than(object));
        let cached = (fleet.is_none() || (own.is_some() && own_written.is_none()))
            .then(|| serde_json::to_value(object).unwrap_or_default());
        let status = cached.as_ref().and_then(|v| v.get("status"));
        let fleet = fleet.unwrap_or_else(|| FleetStatus::owned_part(status));
        let own = own.map(|own| {
            own_written.unwrap_or_else(|| {
                let fields = status.and_then(serde_json::Value::as_object);
                (own.keys())
                    .filter_map(|key| Some((key.clone(), fields?.get(key)?.clone())))
                    .collect()
            })
        });
        (fleet, own)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::ConfigMap;

    use crate::core::{ClusterOutcome, ClusterState};
    use crate::engine::engine::Engine;
    use crate::engine::test_engine::{CONTROL_CLUSTER, TestController, engine, parent};
    use crate::testing::fake_api::{self, status};

    /// Writes `outcomes` over the status as a reconcile of `object` would find it.
    async fn write(
        engine: &Engine<TestController>,
        object: &ConfigMap,
        outcomes: &BTreeMap<String, ClusterOutcome>,
    ) {
        let previous = engine.previous_status(object);
        let write = (object, &CONTROL_CLUSTER, None);
        engine
            .write_status(write, &previous, outcomes, &BTreeMap::new())
            .await;
    }

    /// cluster-a synced, with one child.
    fn ready_in_cluster_a() -> BTreeMap<String, ClusterOutcome> {
        [(
            "cluster-a".to_owned(),
            ClusterOutcome {
                fenced: None,
                state: ClusterState::Applied,
                children: 1,
                message: None,
            },
        )]
        .into()
    }

    #[tokio::test]
    async fn a_parent_kind_without_a_status_subresource_is_detected_once_and_skipped() {
        let (client, requests) = fake_api::client(|_, _, _| {
            status(
                404,
                "NotFound",
                "the server could not find the requested resource",
            )
        });
        let engine = engine(client);
        let outcomes = ready_in_cluster_a();
        for _ in 0..3 {
            write(&engine, &parent(&[]), &outcomes).await;
        }
        assert_eq!(requests.lines().len(), 1, "tried once, then skipped");
    }

    #[tokio::test]
    async fn a_reconcile_that_starts_before_the_cache_shows_the_last_write_does_not_repeat_it() {
        // The write answers with resourceVersion 2; the cached parent stays at 1 for a while.
        let (client, requests) = fake_api::client(|_, _, _| {
            (
                200,
                serde_json::json!({ "metadata": { "resourceVersion": "2" } }),
            )
        });
        let engine = engine(client);
        let outcomes = ready_in_cluster_a();
        write(&engine, &parent(&[]), &outcomes).await;
        write(&engine, &parent(&[]), &outcomes).await;
        assert_eq!(
            requests.lines().len(),
            1,
            "the stale cache is not compared against"
        );
        // A later version without kubeplex's status (someone removed it): the cache is the truth again.
        let mut later = parent(&[]);
        later.metadata.resource_version = Some("3".into());
        write(&engine, &later, &outcomes).await;
        assert_eq!(requests.lines().len(), 2, "{:?}", requests.lines());
    }

    #[tokio::test]
    async fn the_status_is_applied_server_side_with_only_kubeplexs_part() {
        let (client, requests) = fake_api::client(|_, _, _| (200, serde_json::json!({})));
        let engine = engine(client);
        let outcomes: BTreeMap<String, ClusterOutcome> = [(
            "cluster-a".to_owned(),
            ClusterOutcome {
                fenced: None,
                state: ClusterState::NotTargeted,
                children: 0,
                message: None,
            },
        )]
        .into();
        write(&engine, &parent(&[]), &outcomes).await;
        let sent = &requests.all()[0];
        assert!(
            sent.uri.contains("/status?") && sent.uri.contains("fieldManager=test-controller"),
            "{sent:?}"
        );
        let body: serde_json::Value = serde_json::from_str(&sent.body).unwrap();
        assert_eq!(
            body["status"]["clusters"]["cluster-a"]["state"],
            "NotTargeted"
        );
        let types = &body["status"]["conditions"];
        assert_eq!(
            (&types[0]["type"], &types[1]["type"]),
            (&"Applied".into(), &"Ready".into())
        );
        assert_eq!(types[0]["status"], "True", "NotTargeted is settled");
        assert_eq!(types[1]["status"], "True", "no child to be healthy");
    }
}
