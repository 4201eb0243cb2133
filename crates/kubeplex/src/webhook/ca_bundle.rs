//! The `caBundle` of the registrations that call the webhooks, kept equal to the CA's certificate: written
//! at start and put back whenever something (a `helm upgrade`, say) empties or changes it.

use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};

use crate::core::{LogThrottle, chain};

/// How often each registration's `caBundle` is looked at.
const EVERY: Duration = Duration::from_secs(30);
/// How often the same failure to write one is logged again.
const LOG_AGAIN_AFTER: Duration = Duration::from_secs(600);

/// An object that calls the webhooks, whose `caBundle` the operator keeps (see
/// [`Webhooks::ca_bundle_in`](super::Webhooks::ca_bundle_in)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Registration {
    /// Every webhook of this `ValidatingWebhookConfiguration`.
    Validating(String),
    /// Every webhook of this `MutatingWebhookConfiguration`.
    Mutating(String),
    /// The conversion webhook of this CustomResourceDefinition (`spec.conversion.strategy: Webhook`).
    Conversion(String),
}

impl std::fmt::Display for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Validating(name) => write!(f, "ValidatingWebhookConfiguration {name}"),
            Self::Mutating(name) => write!(f, "MutatingWebhookConfiguration {name}"),
            Self::Conversion(name) => write!(f, "CustomResourceDefinition {name}"),
        }
    }
}

/// Keeps every registration's `caBundle` equal to `bundle` (PEM), for ever.
pub(super) async fn keep(client: Client, registrations: Vec<Registration>, bundle: String) {
    let mut logged: Vec<LogThrottle> = registrations
        .iter()
        .map(|_| LogThrottle::new(LOG_AGAIN_AFTER))
        .collect();
    let mut ticks = tokio::time::interval(EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        for (registration, logged) in registrations.iter().zip(&mut logged) {
            match write(&client, registration, bundle.as_bytes()).await {
                Ok(true) => {
                    logged.reset();
                    tracing::info!(%registration, "wrote the webhook CA into its caBundle");
                }
                Ok(false) => logged.reset(),
                Err(problem) => {
                    if logged.warn(&problem) {
                        tracing::warn!(%registration, %problem, "cannot write the webhook CA into its caBundle; trying again");
                    }
                }
            }
        }
    }
}

/// Sets the `caBundle` of every webhook of the configuration `$name` of kind `$kind` (validating and
/// mutating ones have the same shape, not the same type); returns early when none changed.
macro_rules! set_in_webhooks {
    ($client:expr, $params:expr, $bundle:expr, $kind:ty, $name:expr) => {{
        let api: Api<$kind> = Api::all($client.clone());
        let mut object = api.get($name).await.map_err(|e| chain(&e))?;
        let configs =
            (object.webhooks.iter_mut().flatten()).map(|w| &mut w.client_config.ca_bundle);
        if !set_all(configs, $bundle) {
            return Ok(false);
        }
        api.replace($name, $params, &object)
            .await
            .map_err(|e| chain(&e))?;
    }};
}

/// Sets the `caBundle` of `registration` to `bundle`; whether it changed anything. A registration changed
/// meanwhile (409) is written at the next look.
async fn write(
    client: &Client,
    registration: &Registration,
    bundle: &[u8],
) -> Result<bool, String> {
    let bundle = ByteString(bundle.to_vec());
    let failed = |error: kube::Error| chain(&error);
    let params = PostParams::default();
    match registration {
        Registration::Validating(name) => set_in_webhooks!(
            client,
            &params,
            &bundle,
            ValidatingWebhookConfiguration,
            name
        ),
        Registration::Mutating(name) => {
            set_in_webhooks!(client, &params, &bundle, MutatingWebhookConfiguration, name)
        }
        Registration::Conversion(name) => {
            let api: Api<CustomResourceDefinition> = Api::all(client.clone());
            let mut crd = api.get(name).await.map_err(failed)?;
            let webhook = (crd.spec.conversion.as_mut())
                .filter(|c| c.strategy == "Webhook")
                .and_then(|c| c.webhook.as_mut())
                .and_then(|w| w.client_config.as_mut());
            let Some(config) = webhook else {
                return Err("its spec.conversion is not a webhook's (strategy: Webhook)".into());
            };
            if !set_all([&mut config.ca_bundle], &bundle) {
                return Ok(false);
            }
            api.replace(name, &params, &crd).await.map_err(failed)?;
        }
    }
    Ok(true)
}

/// Sets each of `bundles` to `bundle`; whether any was another.
fn set_all<'a>(
    bundles: impl IntoIterator<Item = &'a mut Option<ByteString>>,
    bundle: &ByteString,
) -> bool {
    let mut changed = false;
    for current in bundles {
        if current.as_ref() != Some(bundle) {
            *current = Some(bundle.clone());
            changed = true;
        }
    }
    changed
}
