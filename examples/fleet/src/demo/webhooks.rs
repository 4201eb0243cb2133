//! The demo's webhooks: the control cluster's API server calls the operator for every AppDeployment
//! written to `crds`, and one the fleet cannot fulfil is refused.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::time::Instant;

use super::DemoError;
use crate::admission::{self, Endpoint};
use crate::{AppDeployment, AppDeploymentSpec, CRD_NAMESPACE, Rollout};

/// Registers the webhooks of the operator listening on `port` for AppDeployments in `crds`; the operator
/// writes its CA into their `caBundle`.
pub async fn register(control: &Client, port: u16) -> Result<(), DemoError> {
    let endpoint = Endpoint::Url(format!("https://127.0.0.1:{port}"));
    let (validating, mutating) = admission::configurations(&endpoint, CRD_NAMESPACE, "Fail", 10);
    let api: Api<ValidatingWebhookConfiguration> = Api::all(control.clone());
    api.create(&PostParams::default(), &validating).await?;
    let api: Api<MutatingWebhookConfiguration> = Api::all(control.clone());
    api.create(&PostParams::default(), &mutating).await?;
    Ok(())
}

/// Why the API server refuses (in a dry run) an AppDeployment whose rollout order names `cluster-x`, once
/// it calls the webhooks (within `within`).
pub async fn refusal(control: &Client, within: Duration) -> Result<String, DemoError> {
    let apps: Api<AppDeployment> = Api::namespaced(control.clone(), CRD_NAMESPACE);
    let spec = AppDeploymentSpec {
        image: "nginx:1.27".into(),
        replicas: 1,
        namespaces: Vec::new(),
        rollout: Some(Rollout {
            strategy: None,
            order: vec!["cluster-x".into()],
        }),
    };
    let elsewhere = AppDeployment::new("elsewhere", spec);
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let deadline = Instant::now() + within;
    loop {
        match apps.create(&dry_run, &elsewhere).await {
            Err(kube::Error::Api(status)) if status.message.contains("admission webhook") => {
                return Ok(status.message);
            }
            // Until the operator wrote its CA in and the API server took the configurations up.
            _ if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(200)).await,
            other => {
                return Err(
                    format!("the webhooks were not called within {within:?}: {other:?}").into(),
                );
            }
        }
    }
}
