//! What the fleet section's two operators share: the parent kind (like the example's `AppDeployment`), the
//! Deployment each parent wants in every child namespace, and what "ready" means for a parent.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::ObjectMeta;
use kube::{CustomResource, ResourceExt};
use kubeplex::{ClusterState, FleetStatus};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Namespace of the parents in the control context.
pub(crate) const PARENT_NAMESPACE: &str = "fleet";
/// The finalizer both operators keep on a parent until its children are gone.
pub(super) const FINALIZER: &str = "bench.kubeplex.dev/cleanup";
/// Label on every child (set by the desired object itself, so both sides carry it): its parent's name.
pub(super) const APP_LABEL: &str = "fleet.bench.kubeplex.dev/app";
/// The logical name of the control context, as both operators call it.
pub(super) const CONTROL: &str = "control";

/// An application to run as a Deployment in each listed namespace of every child context.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "bench.kubeplex.dev",
    version = "v1",
    kind = "FleetApp",
    namespaced,
    status = "FleetAppStatus"
)]
pub(crate) struct FleetAppSpec {
    pub image: String,
    pub replicas: i32,
    pub namespaces: Vec<String>,
}

/// kubeplex writes its per-cluster status and `Ready` condition; the baseline writes the same shape.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub(crate) struct FleetAppStatus {
    #[serde(flatten)]
    pub fleet: FleetStatus,
}

/// The Deployment `app` wants in `namespace` (the same in every child context).
pub(crate) fn deployment_for(app: &FleetApp, namespace: &str) -> Deployment {
    let labels: BTreeMap<String, String> = [(APP_LABEL.to_owned(), app.name_any())].into();
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

/// The image of a Deployment's first container.
pub(super) fn image_of(deployment: &Deployment) -> Option<&str> {
    deployment
        .spec
        .template
        .spec
        .as_ref()?
        .containers
        .first()?
        .image
        .as_deref()
}

/// Whether a parent is done: it carries the finalizer, and its status says Applied (reason `AllClustersApplied`)
/// with every one of `contexts` Ready and holding `children` children.
pub(super) fn is_ready(app: &FleetApp, contexts: &[String], children: u32) -> bool {
    let Some(status) = &app.status else {
        return false;
    };
    app.finalizers().iter().any(|f| f == FINALIZER)
        && status
            .fleet
            .conditions
            .iter()
            .any(|c| c.type_ == "Applied" && c.status == "True" && c.reason == "AllClustersApplied")
        && contexts.iter().all(|context| {
            status
                .fleet
                .clusters
                .get(context)
                .is_some_and(|c| c.state == ClusterState::Applied && c.children == children)
        })
}
