//! Replicas that share one CA from a Secret: the first makes it, the second reads it, and the operator keeps
//! its certificate in the configuration's `caBundle`, by which the API server trusts both.

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{CustomResourceExt, ResourceExt};
use kubeplex::webhook::{
    AdmissionRequest, FleetView, Registration, Validate, Webhooks, validating_path,
};
use kubeplex::{ContextName, Manager};
use kubeplex_testenv::eventually;
use serde_json::json;

use super::{PANIC, parent, webhook};
use crate::children::parent::{CONTROL, Parent};
use crate::support::{create_namespace, polling, stop, wait_started};

/// Refuses a Parent with the [`PANIC`] annotation, without panicking: a handler that needs no cache.
struct Marked;

impl Validate for Marked {
    type Context = ContextName;
    type Kind = Parent;

    async fn validate(
        &self,
        request: &AdmissionRequest<Parent>,
        _: &FleetView<ContextName>,
    ) -> Result<(), String> {
        let marked = (request.object.as_ref()).is_some_and(|p| p.annotations().contains_key(PANIC));
        if marked { Err("marked".into()) } else { Ok(()) }
    }
}

#[tokio::test]
async fn replicas_share_one_ca_from_a_secret_and_keep_its_bundle_in_the_configuration() {
    const CA_NAMESPACE: &str = "webhook-ca";
    let env = crate::support::clusters([("control", Parent::crd())]).await;
    let control = env.client("control").await.unwrap();
    create_namespace(&control, CA_NAMESPACE).await;
    let replica = async || {
        let webhooks = Webhooks::new("127.0.0.1:0")
            .ca_secret(CONTROL, CA_NAMESPACE, "webhook-ca")
            .ca_bundle_in(Registration::Validating("kubeplex-test-ca".into()))
            .validate(Marked);
        let running = Manager::with_kubeconfig(env.kubeconfig().clone())
            .webhooks(webhooks)
            .start()
            .await
            .unwrap();
        wait_started(&running, "a replica starts").await;
        running
    };
    let url = |running: &kubeplex::Running| {
        let port = running.webhook_address().unwrap().port();
        format!("https://127.0.0.1:{port}{}", validating_path::<Parent>())
    };
    let first = replica().await;
    // No caBundle: the operator writes it.
    let mut config = webhook("ca.test.kubeplex.dev", &url(&first), "");
    config["clientConfig"]
        .as_object_mut()
        .unwrap()
        .remove("caBundle");
    config["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] = json!(CA_NAMESPACE);
    let config: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": { "name": "kubeplex-test-ca" }, "webhooks": [config] }))
    .unwrap();
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(control.clone());
    configs
        .create(&PostParams::default(), &config)
        .await
        .unwrap();

    let secrets: Api<Secret> = Api::namespaced(control.clone(), CA_NAMESPACE);
    let ca = eventually("the CA stored", polling(), async || {
        let secret = secrets.get_opt("webhook-ca").await.unwrap()?;
        secret.data?.get("tls.crt").cloned()
    })
    .await;
    eventually("the CA written into the caBundle", polling(), async || {
        let config = configs.get("kubeplex-test-ca").await.unwrap();
        let bundle = config.webhooks?.first()?.client_config.ca_bundle.clone()?;
        (bundle == ca).then_some(())
    })
    .await;
    let parents: Api<Parent> = Api::namespaced(control.clone(), CA_NAMESPACE);
    let marked = parent("marked", &[], &[(PANIC, "yes")]);
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let refused_by = async |running: &kubeplex::Running| {
        let mut config = configs.get("kubeplex-test-ca").await.unwrap();
        config.webhooks.as_mut().unwrap()[0].client_config.url = Some(url(running));
        configs
            .replace("kubeplex-test-ca", &PostParams::default(), &config)
            .await
            .unwrap();
        eventually(
            "the replica trusted and called",
            polling(),
            async || match parents.create(&dry_run, &marked).await {
                Err(kube::Error::Api(status)) if status.message.contains("marked") => Some(()),
                _ => None,
            },
        )
        .await;
    };
    refused_by(&first).await;

    // A second replica signs with the same CA: the API server trusts it by the same bundle.
    let second = replica().await;
    refused_by(&second).await;
    let stored = secrets.get("webhook-ca").await.unwrap().data.unwrap();
    assert_eq!(
        stored.get("tls.crt"),
        Some(&ca),
        "the second replica read the CA, made none"
    );

    stop(second).await;
    stop(first).await;
    configs
        .delete("kubeplex-test-ca", &DeleteParams::default())
        .await
        .unwrap();
}
