//! The demo's third part: a progressive rollout. `crd-a` gets `spec.rollout` (cluster-a, then
//! cluster-b) and a new image; the demo plays the workload in place of a kubelet
//! ([`kubelet`](super::kubelet)): cluster-a goes `Degraded`, which halts the rollout, then `Healthy`, which
//! lets it go on to cluster-b.

use std::io::Write;
use std::time::Duration;

use kube::Client;
use kube::api::Api;
use kubeplex_testenv::try_eventually;

use super::kubelet::{Played, image_of, play};
use super::{Clients, DemoError, condition, table};
use crate::{AppDeployment, CHILD_NAMESPACES, CRD_NAMESPACE, RolloutPhase, RolloutStatus};

/// The instance rolled out, and its clusters in order.
const NAME: &str = "crd-a";
const ORDER: [&str; 2] = ["cluster-a", "cluster-b"];
const OLD: &str = "nginx:1.27";
const NEW: &str = "nginx:1.28";
/// How long each step may take.
const WAIT: Duration = Duration::from_secs(60);

/// Creates or updates an `AppDeployment` in `namespace` of the control cluster whose image is rolled out
/// one cluster at a time, in `order`.
pub async fn apply_with_rollout(
    control: &Client,
    namespace: &str,
    name: &str,
    image: &str,
    replicas: i32,
    order: &[&str],
) -> Result<(), DemoError> {
    let spec = serde_json::json!({
        "image": image, "replicas": replicas,
        "rollout": { "strategy": "OneClusterAtATime", "order": order },
    });
    super::apply_spec(control, namespace, name, spec).await
}

/// The rollout of `crd-a` from `nginx:1.27` to `nginx:1.28`, halted by a Degraded cluster-a and resumed
/// when it recovers, with the table at each stop.
pub(super) async fn progressive(
    clients: &mut Clients,
    out: &mut impl Write,
) -> Result<(), DemoError> {
    // The clusters that joined and left are not part of this.
    clients
        .children
        .retain(|(name, _)| ORDER.contains(&name.as_str()));
    let cluster = |name: &str| {
        let found = clients.children.iter().find(|(n, _)| n == name);
        found
            .map(|(_, client)| client.clone())
            .ok_or("no such cluster")
    };
    let (a, b) = (cluster(ORDER[0])?, cluster(ORDER[1])?);
    writeln!(
        out,
        "Progressive rollout: {NAME} gets spec.rollout {{strategy: OneClusterAtATime, order: [{}]}}. \
         Nothing runs pods here, so the demo plays the kubelet and the Deployment controller: it writes \
         each Deployment's status.",
        ORDER.join(", ")
    )?;
    apply_with_rollout(&clients.control, CRD_NAMESPACE, NAME, OLD, 2, &ORDER).await?;
    for client in [&a, &b] {
        play_all(client, Played::Healthy).await?;
    }
    wait_status(clients, "Ready with nginx:1.27 everywhere", |app| {
        condition(app, "Ready") == "True"
            && phase(app).is_some_and(|r| r.phase == RolloutPhase::Complete)
    })
    .await?;
    writeln!(
        out,
        "{NAME} runs {OLD}, Healthy in both clusters. Its image becomes {NEW} ..."
    )?;

    apply_with_rollout(&clients.control, CRD_NAMESPACE, NAME, NEW, 2, &ORDER).await?;
    wait_images(&a, NEW).await?;
    writeln!(
        out,
        "cluster-a has {NEW}; its pods crash-loop (simulated: no replica available past the progress deadline) ..."
    )?;
    play_all(&a, Played::Degraded).await?;
    // The rollout's record is written before the children are applied, the clusters' health after: the
    // table is shown once both say so.
    wait_status(
        clients,
        "halted at cluster-a, its Deployments Degraded",
        |app| {
            phase(app).is_some_and(|r| r.phase == RolloutPhase::Halted)
                && degraded(app, ORDER[0]) == CHILD_NAMESPACES.len()
        },
    )
    .await?;
    writeln!(out, "\n{}", table(clients).await?)?;

    writeln!(
        out,
        "cluster-a recovers (simulated: every replica available) ..."
    )?;
    play_all(&a, Played::Healthy).await?;
    wait_images(&b, NEW).await?;
    writeln!(out, "cluster-b has {NEW}; it comes up too ...")?;
    play_all(&b, Played::Healthy).await?;
    wait_status(clients, "Ready with nginx:1.28 everywhere", |app| {
        condition(app, "Ready") == "True"
            && phase(app).is_some_and(|r| r.phase == RolloutPhase::Complete && r.image == NEW)
    })
    .await?;
    writeln!(out, "\n{}", table(clients).await?)?;
    Ok(())
}

fn phase(app: &AppDeployment) -> Option<&RolloutStatus> {
    app.status.as_ref()?.rollout.as_ref()
}

/// How many of the instance's children in `cluster` its status calls `Degraded`.
fn degraded(app: &AppDeployment, cluster: &str) -> usize {
    let status = app
        .status
        .as_ref()
        .and_then(|s| s.fleet.clusters.get(cluster));
    let health = status.and_then(|c| c.health.as_ref());
    health.map_or(0, |h| h.degraded as usize)
}

/// Plays every Deployment of the instance in a cluster.
async fn play_all(client: &Client, played: Played) -> Result<(), DemoError> {
    for namespace in CHILD_NAMESPACES {
        play(client, namespace, NAME, played).await?;
    }
    Ok(())
}

/// Waits until every Deployment of the instance in a cluster runs `image`.
async fn wait_images(client: &Client, image: &str) -> Result<(), DemoError> {
    try_eventually(format!("{NAME} runs {image}"), WAIT, async || {
        for namespace in CHILD_NAMESPACES {
            let api: Api<k8s_openapi::api::apps::v1::Deployment> =
                Api::namespaced(client.clone(), namespace);
            let running = api.get_opt(NAME).await.map_err(|e| e.to_string())?;
            let running = running.and_then(|d| image_of(&d));
            if running.as_deref() != Some(image) {
                return Err(format!("{namespace}: {running:?}"));
            }
        }
        Ok(())
    })
    .await?;
    Ok(())
}

/// Waits until the instance's status satisfies `done`.
async fn wait_status(
    clients: &Clients,
    what: &str,
    done: impl Fn(&AppDeployment) -> bool,
) -> Result<(), DemoError> {
    let api: Api<AppDeployment> = Api::namespaced(clients.control.clone(), CRD_NAMESPACE);
    try_eventually(format!("{NAME}: {what}"), WAIT, async || {
        let app = api.get(NAME).await.map_err(|e| e.to_string())?;
        if done(&app) {
            Ok(())
        } else {
            let rollout = phase(&app).map_or("-", |r| r.message.as_str());
            Err(format!(
                "Ready {}, rollout: {rollout}",
                condition(&app, "Ready")
            ))
        }
    })
    .await?;
    Ok(())
}
