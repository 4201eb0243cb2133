//! The reconciler: one Deployment per target namespace in each child cluster and each member of the fleet.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{ObjectMeta, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Resource as _, ResourceExt};
use kubeplex::prelude::*;
use kubeplex::status::RecentWrites;

use crate::rollout::{self, ClusterView, IMAGE_ANNOTATION, RolloutEvent, Seen};
use crate::{AppDeployment, Fleet, RolloutStatus};

/// Declares where things live: the `AppDeployment`s in `crds` of the control cluster, their Deployments in
/// two namespaces of both child clusters and of every member of the fleet (clusters that join at run time:
/// `fleet run --members-from-secrets`, docs/fleets.md). The runtime watches all of them, keeps a finalizer
/// on each `AppDeployment` until its Deployments are gone everywhere, and writes the per-cluster status.
///
/// One per manager (`AppDeployer::default()`): it remembers the rollout statuses it wrote.
#[controller(
    crd = AppDeployment,
    contexts = [Fleet::Control],
    namespaces = ["crds"],
    owns(Deployment, members, contexts = [Fleet::ClusterA, Fleet::ClusterB], namespaces = ["namespace-a", "namespace-b"]),
    finalizer = "demo.kubeplex.dev/cleanup",
    error_requeue = "5s",
)]
#[derive(Default)]
pub struct AppDeployer {
    /// The rollout statuses (`status.rollout`) this reconciler wrote lately, for the moments the parent's
    /// cache trails them: a reconcile that starts before the cache shows a write must compare with what
    /// was written, or it would tell a transition twice and give a cluster behind a record older than its
    /// last one.
    written: RecentWrites<Option<RolloutStatus>>,
}

/// Why a reconcile of an `AppDeployment` failed.
#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    /// The spec cannot be fulfilled; nothing changes until it does.
    #[error("invalid spec: {0}")]
    InvalidSpec(String),
    /// The rollout's record of what each cluster is given (`status.rollout.clusters`) could not be
    /// written; no cluster is given anything new until it is.
    #[error("writing the rollout's status failed")]
    RolloutRecord(#[source] WriteError),
    /// A child was refused by the runtime.
    #[error(transparent)]
    Kubeplex(#[from] kubeplex::Error),
}

impl Reconcile for AppDeployer {
    type Error = DeployError;

    /// Business logic only: which Deployments should exist. Applying them, pruning the rest, and the
    /// status are the runtime's job; an unreachable cluster never holds back the other.
    async fn reconcile(
        &self,
        app: Arc<AppDeployment>,
        cx: &Cx<Fleet>,
    ) -> Result<Action, Self::Error> {
        // The child namespaces this operator owns: the attribute's, or those `fleet run` was given.
        let owns = cx.namespaces_of::<Deployment>(Fleet::ClusterA);
        if let Some(problem) = app.spec.problem(&owns) {
            return Err(DeployError::InvalidSpec(problem));
        }
        // cluster-a, cluster-b, then every member of the fleet now (none unless `fleet run` was given some).
        let targets = cx.clusters_of::<Deployment>();
        let namespaces = app.spec.targets(&owns);
        let Some(order) = app.spec.rollout.as_ref().map(|r| &r.order) else {
            for cluster in targets {
                for namespace in &namespaces {
                    cx.child(cluster.clone(), deployment_for(&app, namespace))?;
                }
            }
            let before = rollout::rollout_of(&app, &self.written);
            if let Err(error) = self
                .write_rollout_status(&app, cx, before.as_ref(), None)
                .await
            {
                log_failed_write(&app, cx, &error);
            }
            return Ok(Action::requeue(Duration::from_secs(3600)));
        };
        // A progressive rollout: the clusters' Deployments as their caches have them decide which image
        // each cluster gets. A change of their health reconciles this parent again; no polling.
        let names: Vec<&str> = targets.iter().map(Cluster::name).collect();
        let clusters: Vec<ClusterView> = (rollout::ordered(&names, order).into_iter())
            .filter_map(|name| targets.iter().find(|t| t.name() == name))
            .map(|target| ClusterView {
                name: target.name().to_owned(),
                children: (cx.children::<Deployment>(target.clone()).iter())
                    .map(Seen::of)
                    .collect(),
            })
            .collect();
        // The parent's status.rollout, or what this process wrote last when the cache does not show it yet.
        let before = rollout::rollout_of(&app, &self.written);
        let given = (before.as_ref()).map_or_else(Default::default, |r| r.clusters.clone());
        let decision = rollout::decide(&app.spec.image, &namespaces, &clusters, &given);
        // The record of what each cluster is given is written before any of it is applied: were it lost,
        // a cluster behind whose cache has no Deployment would get the new image early.
        // Its Events are told once the status says so: a failed write tells them with the next one.
        let now = Some(&decision.status);
        match self
            .write_rollout_status(&app, cx, before.as_ref(), now)
            .await
        {
            Ok(()) => {
                for event in rollout::rollout_events(before.as_ref(), &decision.status) {
                    publish(&app, cx, event).await;
                }
            }
            Err(error) if decision.status.clusters != given => {
                return Err(DeployError::RolloutRecord(error));
            }
            Err(error) => log_failed_write(&app, cx, &error),
        }
        for cluster in targets {
            for namespace in &namespaces {
                let image = decision.image(cluster.name(), namespace);
                let image = image.unwrap_or(&app.spec.image);
                cx.child(cluster.clone(), deployment_running(&app, namespace, image))?;
            }
        }
        Ok(Action::requeue(Duration::from_secs(3600)))
    }

    /// An invalid spec waits for the spec to change (the status and an Event say why); retrying it
    /// would fail the same way. Other errors retry with the default backoff.
    fn error_policy(&self, app: Arc<AppDeployment>, error: &DeployError, cx: &Cx<Fleet>) -> Action {
        match error {
            DeployError::InvalidSpec(_) => Action::await_change(),
            DeployError::RolloutRecord(_) | DeployError::Kubeplex(_) => {
                let _ = app;
                Action::requeue(cx.error_requeue())
            }
        }
    }
}

/// Why the rollout's status could not be written (kubeplex's error, or the API server's), kept as the
/// source so the runtime still sees what it is (a write fenced off from a replica that lost its lease).
type WriteError = Box<dyn std::error::Error + Send + Sync>;

impl AppDeployer {
    /// Writes the rollout's part of the parent's status (`status.rollout`) when it changed from `before`,
    /// as a field manager of its own beside kubeplex's; `None` removes it. A failure is the caller's to
    /// judge: a reconcile that changes what a cluster is given fails with it, other changes wait for the
    /// next reconcile.
    async fn write_rollout_status(
        &self,
        app: &AppDeployment,
        cx: &Cx<Fleet>,
        before: Option<&RolloutStatus>,
        rollout: Option<&RolloutStatus>,
    ) -> Result<(), WriteError> {
        if before == rollout {
            return Ok(());
        }
        let mut status = serde_json::Map::new();
        if let Some(rollout) = rollout {
            status.insert("rollout".into(), serde_json::json!(rollout));
        }
        let patch = serde_json::json!({
            "apiVersion": "demo.kubeplex.dev/v1", "kind": "AppDeployment", "status": status,
        });
        let manager = format!("{}-rollout", cx.controller());
        let api = cx.api::<AppDeployment>(cx.cluster(), &app.namespace().unwrap_or_default())?;
        let params = PatchParams::apply(&manager).force();
        let written = (api.patch_status(&app.name_any(), &params, &Patch::Apply(&patch))).await?;
        let version = written.metadata.resource_version.as_deref();
        self.written.record(app, version, rollout.cloned());
        Ok(())
    }
}

fn log_failed_write(app: &AppDeployment, cx: &Cx<Fleet>, error: &WriteError) {
    let context = cx.cluster();
    tracing::warn!(cluster = %context.name(), object = %app.name_any(), %error, "writing the rollout's status failed");
}

/// Publishes a rollout's Event on the parent, in its own cluster, as the controller (kube's `Recorder`,
/// as kubeplex's own Events). A failure to publish is logged: an Event never holds back the rollout.
async fn publish(app: &AppDeployment, cx: &Cx<Fleet>, event: RolloutEvent) {
    let context = cx.cluster();
    let published = match cx.client(context.clone()) {
        Ok(client) => {
            let reporter = Reporter {
                controller: cx.controller().to_owned(),
                instance: None,
            };
            let event = Event {
                type_: if event.warning {
                    EventType::Warning
                } else {
                    EventType::Normal
                },
                reason: event.reason.into(),
                note: Some(event.message.chars().take(1024).collect()),
                action: "Rollout".into(),
                secondary: None,
            };
            (Recorder::new(client, reporter)
                .publish(&event, &app.object_ref(&()))
                .await)
                .map_err(|e| e.to_string())
        }
        Err(error) => Err(error.to_string()),
    };
    if let Err(error) = published {
        tracing::warn!(cluster = %context.name(), object = %app.name_any(), reason = event.reason, %error, "publishing the rollout's event failed");
    }
}

/// The Deployment that runs `app` in `namespace` (the same in every child cluster).
pub fn deployment_for(app: &AppDeployment, namespace: &str) -> Deployment {
    deployment_running(app, namespace, &app.spec.image)
}

/// The Deployment that runs `image` for `app` in `namespace`, saying so in its [`IMAGE_ANNOTATION`] (what a
/// progressive rollout reads from the cache to know what each cluster runs).
pub fn deployment_running(app: &AppDeployment, namespace: &str, image: &str) -> Deployment {
    let labels: std::collections::BTreeMap<String, String> =
        [("app".to_owned(), app.name_any())].into();
    Deployment {
        metadata: ObjectMeta {
            name: Some(app.name_any()),
            namespace: Some(namespace.to_owned()),
            labels: Some(labels.clone()),
            annotations: Some([(IMAGE_ANNOTATION.to_owned(), image.to_owned())].into()),
            ..ObjectMeta::default()
        },
        spec: DeploymentSpec {
            replicas: Some(app.spec.replicas),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "app".into(),
                        image: Some(image.to_owned()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        },
        ..Deployment::default()
    }
}
