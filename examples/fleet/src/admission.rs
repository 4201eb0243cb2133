//! The operator's webhooks and what registers them: an `AppDeployment` is checked against the fleet when it
//! is written — a rollout order naming a cluster the fleet does not have, namespaces the operator does not
//! own — instead of failing later in a status nobody reads; a rollout's strategy is written in when left
//! out; and it is converted between `v1` and `v2` ([`AppConversion`]).

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::crd::merge_crds;
use kube::{CustomResourceExt as _, Resource as _};
use kubeplex::webhook::{
    AdmissionRequest, CONVERSION_PATH, FleetView, Mutate, Registration, Validate, Webhooks,
    mutating_path, validating_path,
};
use serde_json::json;

use crate::conversion::AppConversion;
use crate::{AppDeployment, Fleet, RolloutStrategy, v2};

/// The name of both webhook configurations `fleet webhooks` prints, whose `caBundle` the operator keeps.
pub const CONFIGURATION: &str = "fleet-operator";
/// The Secret (in the operator's namespace of the control cluster) that keeps the webhooks' CA.
pub const CA_SECRET: &str = "fleet-operator-webhook-ca";

/// Refuses an `AppDeployment` the operator could not fulfil: its spec's problem ([`problem`]), or a rollout
/// order that names a cluster the fleet does not have (a name already in the order before an update
/// passes, so a member that left does not lock its parents).
///
/// [`problem`]: crate::AppDeploymentSpec::problem
pub struct AppCheck {
    /// The child namespaces the operator owns (`fleet run --child-namespaces`).
    owns: Vec<String>,
}

impl AppCheck {
    /// A check for an operator that owns these child namespaces.
    pub fn new(owns: Vec<String>) -> Self {
        Self { owns }
    }
}

impl Validate for AppCheck {
    type Context = Fleet;
    type Kind = AppDeployment;

    async fn validate(
        &self,
        request: &AdmissionRequest<AppDeployment>,
        fleet: &FleetView<Fleet>,
    ) -> Result<(), String> {
        let Some(app) = &request.object else {
            return Ok(());
        };
        let owns: Vec<&str> = self.owns.iter().map(String::as_str).collect();
        if let Some(problem) = app.spec.problem(&owns) {
            return Err(problem);
        }
        let before = (request.old_object.as_ref())
            .and_then(|old| old.spec.rollout.as_ref())
            .map(|r| r.order.clone())
            .unwrap_or_default();
        let order = app
            .spec
            .rollout
            .as_ref()
            .map(|r| &r.order[..])
            .unwrap_or_default();
        let unknown: Vec<&str> = (order.iter())
            .filter(|name| !before.contains(name) && !fleet.has_cluster(name))
            .map(String::as_str)
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        let known: Vec<String> = fleet.clusters().into_keys().collect();
        Err(format!(
            "spec.rollout.order names clusters the fleet does not have: {} (it has {})",
            unknown.join(", "),
            known.join(", ")
        ))
    }
}

/// Writes `spec.rollout.strategy` in when a rollout leaves it out: the one strategy there is.
pub struct AppDefaults;

impl Mutate for AppDefaults {
    type Context = Fleet;
    type Kind = AppDeployment;

    async fn mutate(
        &self,
        app: &mut AppDeployment,
        _: &AdmissionRequest<AppDeployment>,
        _: &FleetView<Fleet>,
    ) -> Result<(), String> {
        if let Some(rollout) = &mut app.spec.rollout {
            rollout
                .strategy
                .get_or_insert(RolloutStrategy::OneClusterAtATime);
        }
        Ok(())
    }
}

/// The webhooks of an operator that owns these child namespaces, on `address`: [`AppCheck`] and
/// [`AppDefaults`], with a certificate from `cert_dir` (cert-manager's) or, without one, signed by the CA
/// in Secret [`CA_SECRET`] of `namespace` in the control cluster, which the operator keeps in the
/// `caBundle` of both [`CONFIGURATION`]s. `dns_names`: the webhook Service's names.
pub fn webhooks(
    owns: Vec<String>,
    address: String,
    cert_dir: Option<std::path::PathBuf>,
    namespace: &str,
    dns_names: Vec<String>,
) -> Webhooks {
    let webhooks = Webhooks::new(address)
        .validate(AppCheck::new(owns))
        .mutate(AppDefaults)
        .convert::<AppDeployment, _>(AppConversion)
        .dns_names(dns_names);
    match cert_dir {
        Some(dir) => webhooks.cert_dir(dir),
        None => webhooks
            .ca_secret(Fleet::Control, namespace, CA_SECRET)
            .ca_bundle_in(Registration::Validating(CONFIGURATION.into()))
            .ca_bundle_in(Registration::Mutating(CONFIGURATION.into()))
            .ca_bundle_in(Registration::Conversion(AppDeployment::crd_name().into())),
    }
}

/// The `AppDeployment` CustomResourceDefinition (what `fleet crd` prints): `v1`, which the API server
/// stores, and `v2`. With the `endpoint` of the operator's webhooks, both are served and converted by the
/// operator (`spec.conversion`; the operator writes its `caBundle`); without, `v2` is not served, since
/// nothing could convert it.
pub fn crd(endpoint: Option<&Endpoint>) -> CustomResourceDefinition {
    let mut crd = merge_crds(vec![AppDeployment::crd(), v2::AppDeployment::crd()], "v1")
        .expect("both versions have the same group, kind, names and scope");
    match endpoint {
        Some(endpoint) => {
            crd.spec.conversion = Some(
                serde_json::from_value(json!({ "strategy": "Webhook", "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": endpoint.client_config(CONVERSION_PATH) } }))
                .expect("a CRD conversion"),
            );
        }
        None => (crd.spec.versions.iter_mut())
            .filter(|v| !v.storage)
            .for_each(|v| v.served = false),
    }
    crd
}

/// How the API server reaches the webhooks: a Service in the control cluster, or a URL (outside a
/// cluster, as the tests and the demo run it).
#[derive(Clone, Debug)]
pub enum Endpoint {
    /// `name`, `namespace` and port of a Service.
    Service {
        /// The Service's name.
        name: String,
        /// Its namespace.
        namespace: String,
        /// Its port.
        port: u16,
    },
    /// `https://host:port`, without a path.
    Url(String),
}

impl Endpoint {
    /// The `clientConfig` (without `caBundle`) that calls `path` here.
    fn client_config(&self, path: &str) -> serde_json::Value {
        match self {
            Self::Service {
                name,
                namespace,
                port,
            } => {
                json!({ "service": { "name": name, "namespace": namespace, "path": path, "port": port } })
            }
            Self::Url(base) => json!({ "url": format!("{base}{path}") }),
        }
    }
}

/// The two webhook configurations for AppDeployments in `namespace` of the control cluster (the operator's
/// `--namespace`), calling `endpoint`; `failure_policy` is `Fail` or `Ignore`. Their `caBundle` is left out:
/// the operator writes it (or cert-manager's CA injector).
pub fn configurations(
    endpoint: &Endpoint,
    namespace: &str,
    failure_policy: &str,
    timeout_seconds: i32,
) -> (ValidatingWebhookConfiguration, MutatingWebhookConfiguration) {
    let webhook = |name: &str, path: String| {
        let client_config = endpoint.client_config(&path);
        json!({ "name": format!("{name}.{}", AppDeployment::group(&())),
            "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": failure_policy, "timeoutSeconds": timeout_seconds,
            "clientConfig": client_config,
            "namespaceSelector": { "matchLabels": { "kubernetes.io/metadata.name": namespace } },
            "rules": [{ "apiGroups": [AppDeployment::group(&())], "apiVersions": [AppDeployment::version(&())],
                "resources": [AppDeployment::plural(&())], "operations": ["CREATE", "UPDATE"] }] })
    };
    let configuration = |webhook: serde_json::Value| json!({ "metadata": { "name": CONFIGURATION }, "webhooks": [webhook] });
    let validating = webhook("validate", validating_path::<AppDeployment>());
    let mutating = webhook("default", mutating_path::<AppDeployment>());
    let validating =
        serde_json::from_value(configuration(validating)).expect("a webhook configuration");
    let mutating =
        serde_json::from_value(configuration(mutating)).expect("a webhook configuration");
    (validating, mutating)
}
