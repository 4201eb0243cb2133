//! The `caBundle` of the registrations that call the webhooks, kept equal to the CA's certificate: written
//! at start and put back whenever something (a `helm upgrade`, say) empties or changes it; a registration
//! not there yet (created after the operator started) is tried again within seconds.

use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};

use crate::core::{LogThrottle, chain};
use crate::executor::RetryBackoff;

/// How often each registration's `caBundle` is looked at.
const EVERY: Duration = Duration::from_secs(30);
/// The first and the longest delay (before jitter) to the next look after one failed to write one.
const RETRY: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(15));
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
    let mut retry = RetryBackoff::new(RETRY.0, RETRY.1);
    loop {
        let mut failed = false;
        for (registration, logged) in registrations.iter().zip(&mut logged) {
            match write(&client, registration, bundle.as_bytes()).await {
                Ok(true) => {
                    logged.reset();
                    tracing::info!(%registration, "wrote the webhook CA into its caBundle");
                }
                Ok(false) => logged.reset(),
                Err(problem) => {
                    failed = true;
                    if logged.warn(&problem) {
                        tracing::warn!(%registration, %problem, "cannot write the webhook CA into its caBundle; trying again");
                    }
                }
            }
        }
        let next = if failed {
            retry.next_delay().min(EVERY)
        } else {
            retry.reset();
            EVERY
        };
        tokio::time::sleep(next).await;
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use serde_json::json;

    use super::*;
    use crate::testing::fake_api;

    /// A configuration created after the operator started gets its `caBundle` within seconds, not at the
    /// next 30-second look.
    #[tokio::test(start_paused = true)]
    async fn a_registration_created_later_is_written_within_seconds() {
        let exists = Arc::new(AtomicBool::new(false));
        let there = exists.clone();
        let (client, requests) = fake_api::client(move |_, _, _| {
            if !there.load(Ordering::SeqCst) {
                return (
                    404,
                    json!({ "kind": "Status", "code": 404, "reason": "NotFound" }),
                );
            }
            let configuration = json!({ "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration", "metadata": { "name": "apps" },
                "webhooks": [{ "name": "validate.demo.dev", "admissionReviewVersions": ["v1"],
                    "sideEffects": "None", "clientConfig": { "url": "https://127.0.0.1:1/v" } }] });
            (200, configuration)
        });
        let keeper = tokio::spawn(keep(
            client,
            vec![Registration::Validating("apps".into())],
            "PEM".into(),
        ));
        // Looks that fail at 0 s and within 1–2 s, 3–6 s; then the configuration exists, and the next look
        // (before 14 s) writes it, where a look every 30 s would not have yet.
        tokio::time::sleep(Duration::from_secs(5)).await;
        exists.store(true, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(16)).await;
        let puts = requests.lines();
        let written = puts.iter().filter(|l| l.starts_with("PUT ")).count();
        assert_eq!(written, 1, "{puts:?}");
        keeper.abort();
    }
}
