//! The example's webhooks on the shared clusters: the API server refuses an AppDeployment whose rollout
//! order names a cluster the fleet does not have, or whose namespaces the operator does not own, saying
//! which; writes a rollout's strategy in; and trusts the operator by the CA it keeps in the configurations'
//! `caBundle` (`fleet webhooks` prints them, with a URL here as the operator runs in this process).

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, DeleteParams, PostParams};
use kubeplex_fleet::admission::{self, CONFIGURATION, Endpoint};
use kubeplex_fleet::{AppDeployment, AppDeploymentSpec, Rollout, RolloutStrategy};

use crate::support::{eventually, stage, started, stop};

fn app(name: &str, namespaces: &[&str], order: &[&str]) -> AppDeployment {
    let rollout = (!order.is_empty()).then(|| Rollout {
        strategy: None,
        order: order.iter().map(|o| o.to_string()).collect(),
    });
    let spec = AppDeploymentSpec {
        image: "nginx:1.27".into(),
        replicas: 1,
        namespaces: namespaces.iter().map(|n| n.to_string()).collect(),
        rollout,
    };
    AppDeployment::new(name, spec)
}

#[tokio::test]
async fn an_app_deployment_the_fleet_cannot_fulfil_is_refused_when_written() {
    let stage = stage("webhooks").await;
    let owns = stage.children.to_vec();
    let webhooks = admission::webhooks(owns, "127.0.0.1:0".into(), None, &stage.parents, vec![]);
    let running = started(stage.manager().webhooks(webhooks)).await;
    let port = running.webhook_address().unwrap().port();
    let endpoint = Endpoint::Url(format!("https://127.0.0.1:{port}"));
    let (validating, mutating) = admission::configurations(&endpoint, &stage.parents, "Fail", 10);
    let control = stage.control().await;
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(control.clone());
    configs
        .create(&PostParams::default(), &validating)
        .await
        .unwrap();
    let mutations: Api<MutatingWebhookConfiguration> = Api::all(control.clone());
    mutations
        .create(&PostParams::default(), &mutating)
        .await
        .unwrap();

    let apps = stage.apps().await;
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    // Once the operator wrote its CA into the caBundle and the API server took the configuration up.
    let elsewhere = app("elsewhere", &[], &["cluster-b", "cluster-x"]);
    let refused = eventually("the webhook called", async || {
        match apps.create(&dry_run, &elsewhere).await {
            Err(kube::Error::Api(status))
                if status.message.contains("validate.demo.kubeplex.dev") =>
            {
                Ok(format!("{} {}", status.code, status.message))
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert!(
        refused.contains(
            "spec.rollout.order names clusters the fleet does not have: cluster-x (it has"
        ),
        "{refused}"
    );
    assert!(
        refused.starts_with("403 "),
        "a refusal is Forbidden: {refused}"
    );
    let unowned = app("unowned", &["kube-system"], &[]);
    let refused = apps
        .create(&PostParams::default(), &unowned)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("namespaces kube-system are not owned by this operator"),
        "{refused}"
    );

    let ordered = app("ordered", &[], &["cluster-b"]);
    let created = apps.create(&PostParams::default(), &ordered).await.unwrap();
    let rollout = created.spec.rollout.unwrap();
    assert_eq!(rollout.strategy, Some(RolloutStrategy::OneClusterAtATime));
    assert_eq!(rollout.order, ["cluster-b"]);

    stop(running).await;
    configs
        .delete(CONFIGURATION, &DeleteParams::default())
        .await
        .unwrap();
    mutations
        .delete(CONFIGURATION, &DeleteParams::default())
        .await
        .unwrap();
    apps.delete("ordered", &DeleteParams::default())
        .await
        .unwrap();
}
