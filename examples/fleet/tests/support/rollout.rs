//! What the rollout tests read and wait for: each cluster's images, the parent's `status.rollout`, and the
//! workload played in place of a kubelet.

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use kubeplex::Context as _;
use kubeplex_fleet::demo::kubelet::{Played, image_of, play};
use kubeplex_fleet::{AppDeployment, CHILD_NAMESPACES, CRD_NAMESPACE, Fleet, RolloutStatus};
use kubeplex_testenv::TestEnv;

use super::eventually;

/// The image of `name`'s Deployment in each child namespace of `cluster` (`-` where there is none).
pub async fn images(env: &TestEnv, cluster: Fleet, name: &str) -> Vec<String> {
    let client = env.client(cluster.name()).await.unwrap();
    let mut images = Vec::new();
    for namespace in CHILD_NAMESPACES {
        let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
        let deployment = api.get_opt(name).await.unwrap();
        images.push(
            deployment
                .and_then(|d| image_of(&d))
                .unwrap_or_else(|| "-".into()),
        );
    }
    images
}

/// Waits until every Deployment of `name` in `cluster` runs `image`.
pub async fn wait_images(env: &TestEnv, cluster: Fleet, name: &str, image: &str) {
    let what = format!("{name}'s Deployments in {cluster} run {image}");
    eventually(&what, async || {
        let images = images(env, cluster, name).await;
        if images.iter().all(|i| i == image) {
            Ok(())
        } else {
            Err(format!("{images:?}"))
        }
    })
    .await;
}

/// The parent's `status.rollout`.
pub async fn rollout_status(env: &TestEnv, name: &str) -> Option<RolloutStatus> {
    let api: Api<AppDeployment> = Api::namespaced(
        env.client(Fleet::Control.name()).await.unwrap(),
        CRD_NAMESPACE,
    );
    api.get(name).await.unwrap().status?.rollout
}

/// Waits until the parent's `status.rollout` satisfies `done`; returns it.
pub async fn wait_rollout(
    env: &TestEnv,
    name: &str,
    what: &str,
    done: impl Fn(&RolloutStatus) -> bool,
) -> RolloutStatus {
    eventually(
        &format!("{name}'s rollout: {what}"),
        async || match rollout_status(env, name).await {
            Some(status) if done(&status) => Ok(status),
            other => Err(format!("{other:?}")),
        },
    )
    .await
}

/// Plays every Deployment of `name` in `cluster` as `played` (see `demo::kubelet`).
pub async fn play_cluster(env: &TestEnv, cluster: Fleet, name: &str, played: Played) {
    let client = env.client(cluster.name()).await.unwrap();
    for namespace in CHILD_NAMESPACES {
        play(&client, namespace, name, played).await.unwrap();
    }
}
