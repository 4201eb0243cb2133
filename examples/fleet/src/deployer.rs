//! The reconciler: one Deployment per target namespace in each child cluster and each member of the fleet.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt;
use kube::api::{ObjectMeta, Patch, PatchParams};
use kubeplex::prelude::*;

use crate::rollout::{self, ClusterView, IMAGE_ANNOTATION, Seen};
use crate::{AppDeployment, Fleet, RolloutStatus};

/// Declares where things live: the `AppDeployment`s in `crds` of the control cluster, their Deployments in
/// two namespaces of both child clusters and of every member of the fleet (clusters that join at run time:
/// `fleet run --members-from-secrets`, docs/fleets.md). The runtime watches all of them, keeps a finalizer
/// on each `AppDeployment` until its Deployments are gone everywhere, and writes the per-cluster status.
#[controller(
    crd = AppDeployment,
    contexts = [Fleet::Control],
    namespaces = ["crds"],
    owns(Deployment, members, contexts = [Fleet::ClusterA, Fleet::ClusterB], namespaces = ["namespace-a", "namespace-b"]),
    finalizer = "demo.kubeplex.dev/cleanup",
    error_requeue = "5s",
)]
pub struct AppDeployer;

/// Why a reconcile of an `AppDeployment` failed.
#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    /// The spec cannot be fulfilled; nothing changes until it does.
    #[error("invalid spec: {0}")]
    InvalidSpec(String),
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
        let targets = cx.targets_of::<Deployment>();
        let namespaces = app.spec.targets(&owns);
        let Some(order) = app.spec.rollout.as_ref().map(|r| &r.order) else {
            for cluster in targets {
                for namespace in &namespaces {
                    cx.child(cluster.clone(), deployment_for(&app, namespace))?;
                }
            }
            write_rollout_status(&app, cx, None).await;
            return Ok(Action::requeue(Duration::from_secs(3600)));
        };
        // A progressive rollout: the clusters' Deployments as their caches have them decide which image
        // each cluster gets. A change of their health reconciles this parent again; no polling.
        let names: Vec<&str> = targets.iter().map(Target::name).collect();
        let clusters: Vec<ClusterView> = (rollout::ordered(&names, order).into_iter())
            .filter_map(|name| targets.iter().find(|t| t.name() == name))
            .map(|target| ClusterView {
                name: target.name().to_owned(),
                children: (cx.children::<Deployment>(target.clone()).iter())
                    .map(Seen::of)
                    .collect(),
            })
            .collect();
        let decision = rollout::decide(&app.spec.image, &namespaces, &clusters);
        for cluster in targets {
            for namespace in &namespaces {
                let image = decision.image(cluster.name(), namespace);
                let image = image.unwrap_or(&app.spec.image);
                cx.child(cluster.clone(), deployment_running(&app, namespace, image))?;
            }
        }
        write_rollout_status(&app, cx, Some(&decision.status)).await;
        Ok(Action::requeue(Duration::from_secs(3600)))
    }

    /// An invalid spec waits for the spec to change (the status and an Event say why); retrying it
    /// would fail the same way. Other errors retry with the default backoff.
    fn error_policy(&self, app: Arc<AppDeployment>, error: &DeployError, cx: &Cx<Fleet>) -> Action {
        match error {
            DeployError::InvalidSpec(_) => Action::await_change(),
            DeployError::Kubeplex(_) => {
                let _ = app;
                Action::requeue(cx.error_requeue())
            }
        }
    }
}

/// Writes the rollout's part of the parent's status (`status.rollout`) when it changed, as a field manager
/// of its own beside kubeplex's; `None` removes it. A failed write is logged and tried again by the next
/// reconcile: it never holds back the children.
async fn write_rollout_status(
    app: &AppDeployment,
    cx: &Cx<Fleet>,
    rollout: Option<&RolloutStatus>,
) {
    if app.status.as_ref().and_then(|s| s.rollout.as_ref()) == rollout {
        return;
    }
    let mut status = serde_json::Map::new();
    if let Some(rollout) = rollout {
        status.insert("rollout".into(), serde_json::json!(rollout));
    }
    let patch = serde_json::json!({
        "apiVersion": "demo.kubeplex.dev/v1", "kind": "AppDeployment", "status": status,
    });
    let manager = format!("{}-rollout", cx.controller());
    let written = match cx.api::<AppDeployment>(cx.context(), &app.namespace().unwrap_or_default())
    {
        Ok(api) => {
            let params = PatchParams::apply(&manager).force();
            (api.patch_status(&app.name_any(), &params, &Patch::Apply(&patch))
                .await)
                .map(drop)
                .map_err(|e| e.to_string())
        }
        Err(error) => Err(error.to_string()),
    };
    if let Err(error) = written {
        let context = cx.context();
        tracing::warn!(context = %context.name(), object = %app.name_any(), %error, "writing the rollout's status failed");
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
