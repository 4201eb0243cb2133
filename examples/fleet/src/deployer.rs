//! The reconciler: one Deployment per target namespace in each child cluster and each member of the fleet.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt;
use kube::api::ObjectMeta;
use kubeplex::prelude::*;

use crate::{AppDeployment, Fleet};

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
        for cluster in cx.targets_of::<Deployment>() {
            for namespace in app.spec.targets(&owns) {
                cx.child(cluster.clone(), deployment_for(&app, namespace))?;
            }
        }
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

/// The Deployment that runs `app` in `namespace` (the same in every child cluster).
pub fn deployment_for(app: &AppDeployment, namespace: &str) -> Deployment {
    let labels: std::collections::BTreeMap<String, String> =
        [("app".to_owned(), app.name_any())].into();
    Deployment {
        metadata: ObjectMeta {
            name: Some(app.name_any()),
            namespace: Some(namespace.to_owned()),
            labels: Some(labels.clone()),
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
                        image: Some(app.spec.image.clone()),
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
