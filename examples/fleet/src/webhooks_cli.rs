//! `fleet webhooks` and `fleet crd`: the webhook configurations and the CRD's conversion that make the
//! control cluster's API server call `fleet run --webhook-port`.

use kubeplex_fleet::admission::{self, Endpoint};
use kubeplex_fleet::demo::DemoError;

/// Where the API server reaches the webhooks, and what it does when they do not answer.
#[derive(Debug, clap::Args)]
pub struct WebhookFlags {
    /// The namespace of the control cluster whose AppDeployments are checked (`fleet run --namespace`).
    #[arg(long, value_name = "NAMESPACE", default_value = "crds")]
    namespace: String,
    #[command(flatten)]
    endpoint: EndpointFlags,
    /// What the API server does when the webhooks do not answer: `Fail` refuses the write, `Ignore`
    /// admits it unchecked.
    #[arg(long, value_name = "POLICY", default_value = "Fail", value_parser = ["Fail", "Ignore"])]
    failure_policy: String,
    /// How long the API server waits for an answer, 1 to 30 seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 10, value_parser = clap::value_parser!(i32).range(1..=30))]
    timeout_seconds: i32,
}

impl WebhookFlags {
    /// The configurations, as YAML.
    pub fn yaml(&self) -> Result<String, DemoError> {
        let endpoint = (self.endpoint.endpoint()?)
            .ok_or_else(|| "give --service NAME.NAMESPACE or --url URL".to_owned())?;
        let (validating, mutating) = admission::configurations(
            &endpoint,
            &self.namespace,
            &self.failure_policy,
            self.timeout_seconds,
        );
        let documents = [
            serde_json::to_value(validating)?,
            serde_json::to_value(mutating)?,
        ];
        let yaml = serde_saphyr::to_string_multiple(&documents)?;
        Ok(format!(
            "# The operator writes each caBundle (the CA in Secret {}) unless it serves a certificate \
             from a directory.\n{yaml}",
            admission::CA_SECRET
        ))
    }

    /// Prints [`yaml`](Self::yaml) to stdout.
    pub fn print(&self) -> Result<(), DemoError> {
        crate::print(&self.yaml()?)
    }
}

/// Where the API server reaches the webhooks.
#[derive(Debug, clap::Args)]
pub struct EndpointFlags {
    /// The webhook Service, as NAME.NAMESPACE.
    #[arg(long, value_name = "NAME.NAMESPACE", conflicts_with = "url")]
    service: Option<String>,
    /// The Service's port.
    #[arg(long, value_name = "PORT", default_value_t = 443)]
    port: u16,
    /// Instead of a Service, the webhooks' base URL (`https://host:port`), for an operator outside the
    /// cluster.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
}

impl EndpointFlags {
    /// The endpoint given, if any.
    pub fn endpoint(&self) -> Result<Option<Endpoint>, DemoError> {
        Ok(match (&self.service, &self.url) {
            (Some(service), _) => {
                let (name, namespace) = service
                    .split_once('.')
                    .ok_or_else(|| format!("--service {service}: not NAME.NAMESPACE"))?;
                Some(Endpoint::Service {
                    name: name.into(),
                    namespace: namespace.into(),
                    port: self.port,
                })
            }
            (None, Some(url)) => Some(Endpoint::Url(url.trim_end_matches('/').into())),
            (None, None) => None,
        })
    }

    /// The CRD `fleet crd` prints: with an endpoint, `v2` served and converted there.
    pub fn print_crd(&self) -> Result<(), DemoError> {
        // Serialized first, so that a closed stdout shows as the io::Error it is.
        let crd = admission::crd(self.endpoint()?.as_ref());
        crate::print(&format!("{}\n", serde_json::to_string_pretty(&crd)?))
    }
}
