//! Waiting until a cluster is ready: its API server answers an authenticated `/readyz`, and then, for a
//! cluster that runs one, its controller manager (started only now) reports every controller on `/healthz`.

use std::time::Duration;

use kube::Client;
use kube::config::Kubeconfig;
use serde_json::json;
use tokio::time::Instant;
use tracing::instrument::WithSubscriber as _;

use crate::control_plane::controllers_not_healthy;
use crate::env::{TestEnv, client_for};
use crate::error::Result;

/// How often readiness is asked, and how long one answer may take.
const POLL_INTERVAL: Duration = Duration::from_millis(100);
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

impl TestEnv {
    /// Waits, at most the start timeout in all, for the API server and then the controller manager;
    /// fails early, with the log's tail, when a process exits.
    pub(crate) async fn wait_ready(&self, cluster: &str) -> Result<()> {
        let deadline = Instant::now() + self.start_timeout;
        self.wait_apiserver_ready(cluster, deadline).await?;
        let Some(url) = self.lock(cluster)?.start_controller_manager()? else {
            return Ok(());
        };
        let started = Instant::now();
        self.wait_controller_manager_ready(cluster, &url, deadline)
            .await?;
        tracing::debug!(cluster, elapsed = ?started.elapsed(), "kube-controller-manager ready");
        Ok(())
    }

    /// Polls an authenticated `/readyz` (anonymous requests get 403 during RBAC bootstrap) until it
    /// answers `ok`.
    async fn wait_apiserver_ready(&self, cluster: &str, deadline: Instant) -> Result<()> {
        let client = self.client(cluster).await?;
        let problem = self
            .poll(cluster, &client, "/readyz", deadline, |body| {
                if body.trim() == "ok" {
                    Ok(())
                } else {
                    Err(format!("/readyz answered {body:?}"))
                }
            })
            .await?;
        match problem {
            None => Ok(()),
            Some(problem) => Err(self.lock(cluster)?.not_ready("kube-apiserver", problem)),
        }
    }

    /// Polls the controller manager's verbose `/healthz` until it reports each of its controllers healthy:
    /// their checks appear once the controllers are built, right before their informers and loops start.
    /// The endpoint is open to anyone (upstream's always-allowed paths); the client trusts the cluster's CA.
    async fn wait_controller_manager_ready(
        &self,
        cluster: &str,
        url: &str,
        deadline: Instant,
    ) -> Result<()> {
        let ca = self.ca_certificate_pem(cluster)?;
        let client = client_for(anonymous_kubeconfig(cluster, url, &ca), cluster).await?;
        let problem = self
            .poll(cluster, &client, "/healthz?verbose", deadline, |body| {
                let missing = controllers_not_healthy(body);
                if missing.is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "/healthz does not report these controllers healthy yet: {}",
                        missing.join(", ")
                    ))
                }
            })
            .await?;
        match problem {
            None => Ok(()),
            Some(problem) => Err(self
                .lock(cluster)?
                .not_ready("kube-controller-manager", problem)),
        }
    }

    /// GETs `path` every [`POLL_INTERVAL`] until `ready` accepts the answer, checking before each request
    /// that the cluster's processes live; `Some(problem)` when the deadline passed first, with the last
    /// thing seen.
    async fn poll(
        &self,
        cluster: &str,
        client: &Client,
        path: &str,
        deadline: Instant,
        ready: impl Fn(&str) -> std::result::Result<(), String>,
    ) -> Result<Option<String>> {
        loop {
            self.lock(cluster)?.check_alive()?;
            let request = http::Request::get(path)
                .body(Vec::new())
                .expect("a static request is valid");
            // Not ready yet is a 500 or 403, which kube's client logs at ERROR (`failed with status 500`);
            // here it is expected, so the request runs with no subscriber: nothing of it is logged.
            let answer = client
                .request_text(request)
                .with_subscriber(tracing::subscriber::NoSubscriber::default());
            let problem = match tokio::time::timeout(ANSWER_TIMEOUT, answer).await {
                Ok(Ok(body)) => match ready(&body) {
                    Ok(()) => return Ok(None),
                    Err(problem) => problem,
                },
                Ok(Err(error)) => error.to_string(),
                Err(_) => format!("{path} did not answer within {ANSWER_TIMEOUT:?}"),
            };
            if Instant::now() >= deadline {
                return Ok(Some(format!(
                    "not ready after {:?}: {problem}",
                    self.start_timeout
                )));
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }
}

/// A kubeconfig for `url` that trusts the cluster's CA and presents no credential.
fn anonymous_kubeconfig(cluster: &str, url: &str, ca_pem: &str) -> Kubeconfig {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let document = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": cluster, "cluster": { "server": url, "certificate-authority-data": ca } }],
        "users": [{ "name": "anonymous", "user": {} }],
        "contexts": [{ "name": cluster, "context": { "cluster": cluster, "user": "anonymous" } }],
        "current-context": cluster,
    });
    serde_json::from_value(document).expect("a generated kubeconfig is well-formed")
}
