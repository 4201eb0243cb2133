//! Playing the workload: the demo's clusters (and the tests') run no kubelet and no controller-manager, so a
//! Deployment never gets replicas by itself. These write a Deployment's status subresource as the
//! Deployment controller would for its current generation, so that its health, and a rollout waiting on
//! it, can be shown. Nothing overwrites what they write there.

use k8s_openapi::api::apps::v1::Deployment;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::DemoError;

/// What the simulated workload does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Played {
    /// Every replica updated and available (`Available=True`).
    Healthy,
    /// No replica available and the rollout past its progress deadline (`Progressing=False`, reason
    /// `ProgressDeadlineExceeded`), as a crash-looping image leaves it.
    Degraded,
}

/// Writes the status of the Deployment `name` in `namespace` as `played`, for the generation it has now;
/// returns the image its pod template runs.
pub async fn play(
    client: &Client,
    namespace: &str,
    name: &str,
    played: Played,
) -> Result<String, DemoError> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let deployment = api.get(name).await?;
    let replicas = deployment.spec.replicas.unwrap_or(1);
    let status = match played {
        Played::Healthy => json!({
            "observedGeneration": deployment.metadata.generation, "replicas": replicas,
            "updatedReplicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas,
            "conditions": [
                { "type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                  "message": "Deployment has minimum availability." },
                { "type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                  "message": format!("ReplicaSet \"{name}\" has successfully progressed.") },
            ],
        }),
        Played::Degraded => json!({
            "observedGeneration": deployment.metadata.generation, "replicas": replicas,
            "updatedReplicas": replicas, "readyReplicas": 0, "availableReplicas": 0,
            "unavailableReplicas": replicas,
            "conditions": [
                { "type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
                  "message": "Deployment does not have minimum availability." },
                { "type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
                  "message": format!("ReplicaSet \"{name}\" has timed out progressing.") },
            ],
        }),
    };
    let patch = json!({ "status": status });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(image_of(&deployment).unwrap_or_default())
}

/// The image a Deployment's pod template runs (its first container's).
pub fn image_of(deployment: &Deployment) -> Option<String> {
    let spec = deployment.spec.template.spec.as_ref()?;
    spec.containers.first()?.image.clone()
}
