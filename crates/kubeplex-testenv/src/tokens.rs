//! Service-account tokens, and kubeconfigs that authenticate with them only.
//!
//! Every API server has a service-account signing key, so the TokenRequest API works as in any cluster
//! (`kubectl create token NAME -n NAMESPACE` does the same). Unless the cluster runs a controller manager
//! ([`TestEnvBuilder::controller_manager`](crate::TestEnvBuilder::controller_manager)), nothing creates a
//! ServiceAccount (not even `default`) or fills a token Secret but the test.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use kube::config::Kubeconfig;
use serde_json::json;

use crate::env::TestEnv;
use crate::error::{Error, Result};

impl TestEnv {
    /// A bearer token for the ServiceAccount `namespace/name` of `cluster`, from the TokenRequest API
    /// (asked with admin credentials; the ServiceAccount must exist). It is valid for the API server's
    /// default of one hour, for the API server's own audience.
    pub async fn service_account_token(
        &self,
        cluster: &str,
        namespace: &str,
        name: &str,
    ) -> Result<String> {
        let api: Api<ServiceAccount> = Api::namespaced(self.client(cluster).await?, namespace);
        let request = TokenRequest {
            // `.into()`: the field is optional from Kubernetes 1.34 on, required before (k8s-openapi's
            // `v1_*` feature is the application's choice).
            spec: TokenRequestSpec::default().into(),
            ..TokenRequest::default()
        };
        let answer = api
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .map_err(|source| Error::Kube {
                cluster: cluster.to_owned(),
                source,
            })?;
        // The token is a `String` before Kubernetes 1.34 and optional from then on: `.into()` takes either,
        // and is a no-op with the newer versions.
        #[allow(clippy::useless_conversion)]
        let token: Option<String> = answer.status.and_then(|status| status.token.into());
        token
            .filter(|token| !token.is_empty())
            .ok_or_else(|| Error::Token {
                cluster: cluster.to_owned(),
                service_account: format!("{namespace}/{name}"),
                problem: "the TokenRequest was answered without a token".into(),
            })
    }

    /// The PEM certificate of the cluster's CA: what a Pod finds in
    /// `/var/run/secrets/kubernetes.io/serviceaccount/ca.crt`.
    pub fn ca_certificate_pem(&self, cluster: &str) -> Result<String> {
        let data = self
            .kubeconfig_cluster(cluster)?
            .certificate_authority_data
            .clone()
            .unwrap_or_default();
        let pem = STANDARD
            .decode(data)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok());
        pem.ok_or_else(|| Error::Pki(format!("cluster {cluster}: the kubeconfig's CA is not PEM")))
    }

    /// A kubeconfig with one context per `(cluster, token)`, named as the cluster, that authenticates
    /// with that bearer token only (no client certificate), and no other context. The first is current.
    pub fn kubeconfig_with_tokens(&self, tokens: &[(&str, &str)]) -> Result<Kubeconfig> {
        let mut clusters = Vec::new();
        let mut users = Vec::new();
        let mut contexts = Vec::new();
        for &(cluster, token) in tokens {
            let entry = self.kubeconfig_cluster(cluster)?;
            let user = format!("{cluster}-token");
            clusters.push(json!({
                "name": cluster,
                "cluster": {
                    "server": entry.server,
                    "certificate-authority-data": entry.certificate_authority_data,
                },
            }));
            users.push(json!({ "name": user, "user": { "token": token } }));
            contexts
                .push(json!({ "name": cluster, "context": { "cluster": cluster, "user": user } }));
        }
        let document = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": clusters,
            "users": users,
            "contexts": contexts,
            "current-context": tokens.first().map(|(cluster, _)| *cluster),
        });
        Ok(serde_json::from_value::<Kubeconfig>(document)
            .expect("a generated kubeconfig is well-formed"))
    }

    fn kubeconfig_cluster(&self, cluster: &str) -> Result<&kube::config::Cluster> {
        self.kubeconfig()
            .clusters
            .iter()
            .find(|c| c.name == cluster)
            .and_then(|c| c.cluster.as_ref())
            .ok_or_else(|| Error::UnknownCluster {
                name: cluster.to_owned(),
                known: self.cluster_names().collect::<Vec<_>>().join(", "),
            })
    }
}
