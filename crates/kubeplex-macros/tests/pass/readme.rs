//! The api-sketch scenario: a typed fleet, a custom resource in the control cluster, Deployments in two
//! member clusters.
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::CustomResource;
use kubeplex::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

kubeplex::contexts! {
    pub enum Fleet {
        Control = "control",
        ClusterA = "cluster-a",
        ClusterB = "cluster-b",
    }
}

#[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "demo.kubeplex.dev",
    version = "v1",
    kind = "AppDeployment",
    namespaced
)]
pub struct AppDeploymentSpec {
    pub image: String,
    pub replicas: i32,
}

#[controller(
    crd = AppDeployment,
    contexts = [Fleet::Control],
    namespaces = ["crds"],
    owns(Deployment, contexts = [Fleet::ClusterA, Fleet::ClusterB],
         namespaces = ["namespace-a", "namespace-b"]),
    finalizer = "demo.kubeplex.dev/cleanup",
)]
pub struct AppDeployer;

impl Reconcile for AppDeployer {
    type Error = kubeplex::Error;

    async fn reconcile(
        &self,
        app: Arc<AppDeployment>,
        cx: &Cx<Fleet>,
    ) -> Result<Action, Self::Error> {
        let _ = (app.spec.replicas, cx.cluster());
        Ok(Action::requeue(Duration::from_secs(3600)))
    }
}

#[test]
fn builds_its_plan() {
    let plan = AppDeployer::plan();
    assert_eq!(plan.name(), "app-deployer");
    let watches: Vec<_> = plan.primary_watches().collect();
    assert_eq!(watches, [(Fleet::Control, Some("crds"))]);
    assert_eq!(plan.finalizer(), Some("demo.kubeplex.dev/cleanup"));
    let child = &plan.children()[0];
    assert_eq!(child.resource().kind, "Deployment");
    assert_eq!(child.watches().count(), 4);
    assert_eq!(
        plan.all_contexts(),
        [Fleet::Control, Fleet::ClusterA, Fleet::ClusterB]
    );
}
