//! The webhook server's settings and handlers, as a builder given to the manager.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::Resource;

use super::ca_bundle::Registration;
use crate::core::{Context, Grant};

use super::admission::{self, Mutate, Validate};
use super::conversion::{self, Convert, Converter};
use super::outcome::FailurePolicy;
use super::route::Route;

/// How long a handler may take before its request is answered by the [`FailurePolicy`]: well under the
/// API server's `timeoutSeconds` (10 s by default), so the answer is the operator's, not a timeout's.
pub const DEFAULT_HANDLER_TIMEOUT: Duration = Duration::from_secs(3);

/// Where the serving certificate comes from.
#[derive(Clone, Debug)]
pub(crate) enum Certificate {
    /// `tls.crt` and `tls.key` in a directory, read again when they change.
    Dir(PathBuf),
    /// Made at start and signed by itself; its PEM is the configurations' `caBundle`
    /// ([`Running::webhook_ca_bundle`](crate::Running::webhook_ca_bundle)).
    SelfSigned,
    /// Made at start and signed by the CA in a Secret of the context, made by the first replica.
    CaSecret {
        context: String,
        namespace: String,
        name: String,
    },
}

/// Admission and conversion webhooks, served over HTTPS by every replica of the operator (a standby
/// answers from its warm caches too); see [`Manager::webhooks`](crate::Manager::webhooks) and
/// docs/webhooks.md.
///
/// Paths follow controller-runtime's: `/validate-<group>-<version>-<kind>` and `/mutate-…` (dots of the
/// group as dashes, the kind in lower case; [`validating_path`](super::validating_path)), and `/convert`
/// for every kind with a converter.
///
/// ```
/// use kube::core::admission::AdmissionRequest;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kubeplex::webhook::{FleetView, Validate, Webhooks};
///
/// kubeplex::contexts! { enum Fleet { Control = "control", ClusterA = "cluster-a" } }
///
/// /// Refuses a ConfigMap whose `cluster` key names no cluster of the fleet.
/// struct KnownCluster;
///
/// impl Validate for KnownCluster {
///     type Context = Fleet;
///     type Kind = ConfigMap;
///
///     async fn validate(
///         &self,
///         request: &AdmissionRequest<ConfigMap>,
///         fleet: &FleetView<Fleet>,
///     ) -> Result<(), String> {
///         let data = request.object.as_ref().and_then(|o| o.data.as_ref());
///         match data.and_then(|d| d.get("cluster")) {
///             Some(name) if !fleet.has_cluster(name) => Err(format!("no cluster {name} in the fleet")),
///             _ => Ok(()),
///         }
///     }
/// }
///
/// let webhooks = Webhooks::new("0.0.0.0:9443")
///     .cert_dir("/tmp/k8s-webhook-server/serving-certs")
///     .validate(KnownCluster);
/// let manager = kubeplex::Manager::new().webhooks(webhooks);
/// # let _ = manager;
/// ```
#[derive(Clone)]
pub struct Webhooks {
    pub(crate) address: String,
    pub(crate) certificate: Certificate,
    /// The names a certificate made at start is for, besides `localhost` and `127.0.0.1`.
    pub(crate) dns_names: Vec<String>,
    /// Whose `caBundle` is kept equal to the CA's certificate.
    pub(crate) registrations: Vec<Registration>,
    pub(crate) timeout: Duration,
    pub(crate) failure_policy: FailurePolicy,
    pub(crate) routes: Vec<Route>,
    pub(crate) converters: Vec<Converter>,
}

impl Webhooks {
    /// Webhooks served on `address` (e.g. `0.0.0.0:9443`; port 0 picks one), with a certificate signed by
    /// itself unless [`cert_dir`](Self::cert_dir) or [`ca_secret`](Self::ca_secret) says otherwise.
    pub fn new(address: impl Into<String>) -> Self {
        Self {
            address: address.into(),
            certificate: Certificate::SelfSigned,
            dns_names: Vec::new(),
            registrations: Vec::new(),
            timeout: DEFAULT_HANDLER_TIMEOUT,
            failure_policy: FailurePolicy::Fail,
            routes: Vec::new(),
            converters: Vec::new(),
        }
    }

    /// Presents the certificate in `dir`: `tls.crt` (PEM, the chain) and `tls.key` (PEM), the files a
    /// `kubernetes.io/tls` Secret mounts (cert-manager's convention). They are read at start, and again
    /// within 10 s of a change, so a renewed certificate is served without a restart.
    pub fn cert_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.certificate = Certificate::Dir(dir.into());
        self
    }

    /// Signs the serving certificate, made at start, with a CA kept in Secret `namespace/name` of
    /// `context` (the cluster whose API server calls the webhooks): the first replica that finds no such
    /// Secret makes the CA and stores it there, the others read it, so that one `caBundle` (the CA's
    /// certificate, kept in the registrations named with [`ca_bundle_in`](Self::ca_bundle_in)) trusts
    /// every replica. The context joins the manager's.
    pub fn ca_secret(
        mut self,
        context: impl Context,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        self.certificate = Certificate::CaSecret {
            context: context.name().to_owned(),
            namespace: namespace.into(),
            name: name.into(),
        };
        self
    }

    /// Keeps the `caBundle` of `registration` (every webhook of a webhook configuration, or a CRD's
    /// conversion) equal to the CA's certificate of [`ca_secret`](Self::ca_secret): written at start and
    /// again within 30 s whenever it differs. Needs `ca_secret`; with a certificate directory, the
    /// certificate's issuer (cert-manager's CA injector) keeps it instead.
    pub fn ca_bundle_in(mut self, registration: Registration) -> Self {
        self.registrations.push(registration);
        self
    }

    /// The DNS names a certificate made at start is for besides `localhost` and `127.0.0.1`, such as the
    /// webhook Service's `<service>.<namespace>.svc`. No effect with [`cert_dir`](Self::cert_dir).
    pub fn dns_names<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.dns_names.extend(names.into_iter().map(Into::into));
        self
    }

    /// What the webhooks need of the CA's context: the CA's Secret read and made, the registrations read
    /// and written.
    pub(crate) fn grants(&self) -> Vec<Grant> {
        let Certificate::CaSecret {
            context, namespace, ..
        } = &self.certificate
        else {
            return Vec::new();
        };
        let context = Some(context.as_str());
        let mut grants = vec![Grant::new(
            context,
            Some(namespace),
            "",
            "secrets",
            &["get", "create"],
        )];
        for registration in &self.registrations {
            let (group, resource) = match registration {
                Registration::Validating(_) => (
                    "admissionregistration.k8s.io",
                    "validatingwebhookconfigurations",
                ),
                Registration::Mutating(_) => (
                    "admissionregistration.k8s.io",
                    "mutatingwebhookconfigurations",
                ),
                Registration::Conversion(_) => {
                    ("apiextensions.k8s.io", "customresourcedefinitions")
                }
            };
            grants.push(Grant::new(
                context,
                None,
                group,
                resource,
                &["get", "update"],
            ));
        }
        grants
    }

    /// The context whose API server keeps the CA and the registrations, if any.
    pub(crate) fn context(&self) -> Option<&str> {
        match &self.certificate {
            Certificate::CaSecret { context, .. } => Some(context),
            _ => None,
        }
    }

    /// How long a handler may take ([`DEFAULT_HANDLER_TIMEOUT`] by default); past it, the request is
    /// answered by the [`FailurePolicy`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How a request is answered when its handler cannot answer ([`FailurePolicy::Fail`] by default).
    /// Conversion always fails closed: an object that cannot be converted is never served.
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.failure_policy = policy;
        self
    }

    /// Validates objects of `V::Kind` at [`validating_path`](super::validating_path) `::<V::Kind>()`.
    pub fn validate<V: Validate>(mut self, validator: V) -> Self {
        self.routes
            .push(admission::validating_route(Arc::new(validator)));
        self
    }

    /// Mutates objects of `M::Kind` at [`mutating_path`](super::mutating_path) `::<M::Kind>()`: the
    /// changes the handler makes become the response's JSON patch.
    pub fn mutate<M: Mutate>(mut self, mutator: M) -> Self {
        self.routes
            .push(admission::mutating_route(Arc::new(mutator)));
        self
    }

    /// Converts objects of `K`'s kind (any version of its CRD) at
    /// [`CONVERSION_PATH`](super::CONVERSION_PATH), for the CRD's `conversion` with `strategy: Webhook`.
    pub fn convert<K: Resource<DynamicType = ()>, X: Convert>(mut self, converter: X) -> Self {
        let (group, kind) = (K::group(&()).into_owned(), K::kind(&()).into_owned());
        self.converters
            .push(conversion::converter(group, kind, Arc::new(converter)));
        self
    }
}

impl std::fmt::Debug for Webhooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let paths: Vec<&str> = self.routes.iter().map(|r| r.path.as_str()).collect();
        f.debug_struct("Webhooks")
            .field("address", &self.address)
            .field("paths", &paths)
            .field("converters", &self.converters.len())
            .field("timeout", &self.timeout)
            .field("failure_policy", &self.failure_policy)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ContextName;

    #[test]
    fn a_ca_secret_needs_its_secret_and_the_registrations_it_keeps() {
        let control = ContextName::new("control");
        let webhooks = Webhooks::new("0.0.0.0:9443")
            .ca_secret(control, "ops", "webhook-ca")
            .ca_bundle_in(Registration::Validating("apps".into()))
            .ca_bundle_in(Registration::Conversion("apps.demo.kubeplex.dev".into()));
        let grants = webhooks.grants();
        let expected = [
            Grant::new(
                Some("control"),
                Some("ops"),
                "",
                "secrets",
                &["get", "create"],
            ),
            Grant::new(
                Some("control"),
                None,
                "admissionregistration.k8s.io",
                "validatingwebhookconfigurations",
                &["get", "update"],
            ),
            Grant::new(
                Some("control"),
                None,
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                &["get", "update"],
            ),
        ];
        assert_eq!(grants, expected);
        assert!(
            Webhooks::new("0.0.0.0:9443").grants().is_empty(),
            "signed by itself: no grant"
        );
        assert_eq!(webhooks.context(), Some("control"));
    }
}
