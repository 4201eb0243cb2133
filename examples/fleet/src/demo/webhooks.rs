//! The demo's webhooks: the control cluster's API server calls the operator for every AppDeployment
//! written to `crds`, and one the fleet cannot fulfil is refused; and for every AppDeployment read or
//! written in `v2`, which the operator converts from and to the `v1` the API server stores.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, CustomResourceExt as _};
use kubeplex_testenv::{Polling, try_eventually};

use super::DemoError;
use crate::admission::{self, Endpoint};
use crate::{AppDeployment, AppDeploymentSpec, CRD_NAMESPACE, Rollout, v2};

/// How often a wait on the API server looks again.
const POLL: Duration = Duration::from_millis(200);

/// Registers the webhooks of the operator listening on `port` for AppDeployments in `crds`, and serves
/// `v2` of the CRD converted by it; the operator writes its CA into their `caBundle`.
pub async fn register(control: &Client, port: u16) -> Result<(), DemoError> {
    let endpoint = Endpoint::Url(format!("https://127.0.0.1:{port}"));
    let (validating, mutating) = admission::configurations(&endpoint, CRD_NAMESPACE, "Fail", 10);
    let api: Api<ValidatingWebhookConfiguration> = Api::all(control.clone());
    api.create(&PostParams::default(), &validating).await?;
    let api: Api<MutatingWebhookConfiguration> = Api::all(control.clone());
    api.create(&PostParams::default(), &mutating).await?;
    let crds: Api<CustomResourceDefinition> = Api::all(control.clone());
    let mut crd = admission::crd(Some(&endpoint));
    crd.metadata.resource_version = crds
        .get(AppDeployment::crd_name())
        .await?
        .metadata
        .resource_version;
    crds.replace(AppDeployment::crd_name(), &PostParams::default(), &crd)
        .await?;
    Ok(())
}

/// Applies an `AppDeployment` in `v2` (server-side), once the API server serves `v2` and trusts the
/// operator to convert it (within `within`).
pub async fn apply_v2(
    control: &Client,
    name: &str,
    image: &str,
    replicas: i32,
    within: Duration,
) -> Result<(), DemoError> {
    let apps: Api<v2::AppDeployment> = Api::namespaced(control.clone(), CRD_NAMESPACE);
    let object = serde_json::json!({
        "apiVersion": "demo.kubeplex.dev/v2", "kind": "AppDeployment", "metadata": { "name": name },
        "spec": { "workload": { "image": image, "replicas": replicas } },
    });
    let params = PatchParams::apply("kubeplex-fleet-demo");
    // Until the API server serves v2 and the operator wrote its CA into the CRD's conversion.
    let what = format!("AppDeployment {name} applied in v2");
    try_eventually(what, Polling::within(within).every(POLL), async || {
        apps.patch(name, &params, &Patch::Apply(&object)).await
    })
    .await?;
    Ok(())
}

/// The image of `v1_name` read in `v2`, and of `v2_name` read in `v1`: what the operator's conversion
/// gives the API server.
pub async fn read_across(
    control: &Client,
    v1_name: &str,
    v2_name: &str,
) -> Result<(String, String), DemoError> {
    let in_v2: Api<v2::AppDeployment> = Api::namespaced(control.clone(), CRD_NAMESPACE);
    let in_v1: Api<AppDeployment> = Api::namespaced(control.clone(), CRD_NAMESPACE);
    let as_v2 = in_v2.get(v1_name).await?.spec.workload.image;
    let as_v1 = in_v1.get(v2_name).await?.spec.image;
    Ok((as_v2, as_v1))
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
    // Until the operator wrote its CA in and the API server took the configurations up.
    let refused = try_eventually(
        "the webhooks called",
        Polling::within(within).every(POLL),
        async || match apps.create(&dry_run, &elsewhere).await {
            Err(kube::Error::Api(status)) if status.message.contains("admission webhook") => {
                Ok(status.message)
            }
            Err(other) => Err(other.to_string()),
            Ok(_) => Err("admitted".to_owned()),
        },
    )
    .await?;
    Ok(refused)
}
