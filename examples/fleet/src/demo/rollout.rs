//! The demo's third part: a progressive rollout. `crd-a` gets `spec.rollout` (cluster-a, then
//! cluster-b) and a new image; the demo plays the workload in place of a kubelet
//! ([`kubelet`](super::kubelet)): cluster-a goes `Degraded`, which halts the rollout, then `Healthy`, which
//! lets it go on to cluster-b.

use kube::Client;
use kube::api::{Api, Patch, PatchParams};

use super::DemoError;
use crate::{AppDeployment, CRD_NAMESPACE};

/// Creates or updates an `AppDeployment` in the control cluster whose image is rolled out one cluster at
/// a time, in `order`.
pub async fn apply_with_rollout(
    control: &Client,
    name: &str,
    image: &str,
    replicas: i32,
    order: &[&str],
) -> Result<(), DemoError> {
    let api: Api<AppDeployment> = Api::namespaced(control.clone(), CRD_NAMESPACE);
    let object = serde_json::json!({
        "apiVersion": "demo.kubeplex.dev/v1", "kind": "AppDeployment",
        "metadata": { "name": name },
        "spec": {
            "image": image, "replicas": replicas,
            "rollout": { "strategy": "OneClusterAtATime", "order": order },
        },
    });
    api.patch(
        name,
        &PatchParams::apply("kubeplex-fleet-demo"),
        &Patch::Apply(&object),
    )
    .await?;
    Ok(())
}
