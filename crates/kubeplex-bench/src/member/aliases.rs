//! The `many_members` section's members: M aliases of the three test API servers, each registered by a
//! kubeconfig Secret of its own whose context names the member and defaults to a namespace of its own, so
//! that members sharing a server keep their children (and their child watches) apart. Also the API
//! servers' request counters, read to count the requests of the process in steady state.

use std::collections::BTreeMap;
use std::time::Instant;

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::config::Kubeconfig;
use kube::{Client, CustomResourceExt};

use super::cluster::{CONTROL, SECRETS_NAMESPACE, SELECTOR_LABEL, single_context};
use crate::fleet::{FleetApp, Host, PARENT_NAMESPACE};
use crate::harness::{CLUSTERS, create_namespace};

/// The label value the section's Secrets carry (other sections' member Secrets carry `true`).
pub(super) const SELECTOR_VALUE: &str = "many";
const IN_FLIGHT: usize = 32;

/// The three test API servers and M members' kubeconfigs, one per alias.
pub(super) struct Aliases {
    pub control: Client,
    /// A client of each test API server, in [`CLUSTERS`] order.
    pub servers: Vec<Client>,
    /// The single-context kubeconfig of each server, as a member's Secret holds it.
    kubeconfigs: Vec<Kubeconfig>,
    secrets: Api<Secret>,
}

/// Member `i`'s name: its Secret's name, its kubeconfig context's and its namespace's.
pub(super) fn member_name(i: usize) -> String {
    format!("many-{i:04}")
}

impl Aliases {
    /// Readies the control cluster (the parents' kind, the Secrets' namespace) and every member's
    /// namespace, for up to `members` members.
    pub async fn prepare(host: &Host<'_>, members: usize) -> Result<Self, String> {
        host.env
            .install_crd(CONTROL, FleetApp::crd())
            .await
            .map_err(|e| e.to_string())?;
        let mut servers = Vec::new();
        let mut kubeconfigs = Vec::new();
        for cluster in CLUSTERS {
            servers.push(host.env.client(cluster).await.map_err(|e| e.to_string())?);
            let text = single_context(host.env.kubeconfig(), cluster)?;
            kubeconfigs.push(Kubeconfig::from_yaml(&text).map_err(|e| e.to_string())?);
        }
        let control = servers[0].clone();
        create_namespace(&control, SECRETS_NAMESPACE).await?;
        create_namespace(&control, PARENT_NAMESPACE).await?;
        let aliases = Self {
            secrets: Api::namespaced(control.clone(), SECRETS_NAMESPACE),
            control,
            servers,
            kubeconfigs,
        };
        stream::iter(0..members)
            .map(|i| {
                let server = aliases.server(i);
                async move { create_namespace(server, &member_name(i)).await }
            })
            .buffer_unordered(IN_FLIGHT)
            .try_collect::<Vec<()>>()
            .await?;
        Ok(aliases)
    }

    /// The API server member `i` is an alias of.
    pub fn server(&self, i: usize) -> &Client {
        &self.servers[i % self.servers.len()]
    }

    /// Member `i`'s kubeconfig: its server's, under the member's name, defaulting to its namespace.
    fn kubeconfig(&self, i: usize) -> Result<String, String> {
        let name = member_name(i);
        let mut kubeconfig = self.kubeconfigs[i % self.kubeconfigs.len()].clone();
        for named in &mut kubeconfig.contexts {
            named.name.clone_from(&name);
            if let Some(context) = &mut named.context {
                context.namespace = Some(name.clone());
            }
        }
        kubeconfig.current_context = Some(name);
        serde_json::to_string(&kubeconfig).map_err(|e| e.to_string())
    }

    /// Creates the Secrets of members `0..members`; the instant the first create was sent.
    pub async fn create_secrets(&self, members: usize) -> Result<Instant, String> {
        let secrets = (0..members)
            .map(|i| {
                Ok(Secret {
                    metadata: ObjectMeta {
                        name: Some(member_name(i)),
                        labels: Some(
                            [(SELECTOR_LABEL.to_owned(), SELECTOR_VALUE.to_owned())].into(),
                        ),
                        ..ObjectMeta::default()
                    },
                    string_data: Some([("kubeconfig".to_owned(), self.kubeconfig(i)?)].into()),
                    ..Secret::default()
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let from = Instant::now();
        stream::iter(secrets)
            .map(|secret| async move {
                self.secrets
                    .create(&PostParams::default(), &secret)
                    .await
                    .map(drop)
                    .map_err(|e| format!("creating a member's Secret: {e}"))
            })
            .buffer_unordered(IN_FLIGHT)
            .try_collect::<Vec<()>>()
            .await?;
        Ok(from)
    }

    /// Deletes every member's Secret (kubeplex removes its finalizer once the member's children are gone).
    /// Tried again after a failure to send: the parent's idle connections (up to one per create sent at
    /// once) may all have gone stale during the joins and the steady window, and each failure drops one.
    pub async fn delete_secrets(&self) -> Result<(), String> {
        let mut tries = 0;
        loop {
            let deleted = self
                .secrets
                .delete_collection(&DeleteParams::default(), &self.selected())
                .await;
            match deleted {
                Ok(_) => return Ok(()),
                Err(kube::Error::Service(_)) if tries <= IN_FLIGHT => tries += 1,
                Err(e) => return Err(format!("deleting the members' Secrets: {e}")),
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// How many members' Secrets are left.
    pub async fn secrets_left(&self) -> Result<usize, String> {
        let list = self.secrets.list_metadata(&self.selected()).await;
        list.map(|l| l.items.len())
            .map_err(|e| format!("listing the members' Secrets: {e}"))
    }

    fn selected(&self) -> ListParams {
        ListParams::default().labels(&format!("{SELECTOR_LABEL}={SELECTOR_VALUE}"))
    }

    /// Requests the three API servers answered so far by verb and resource (`GET leases`, `PATCH
    /// deployments/status`), watches excepted, from `apiserver_request_total`.
    pub async fn requests(&self) -> Result<BTreeMap<String, f64>, String> {
        let mut sum = BTreeMap::new();
        for client in &self.servers {
            let text = crate::system::server_metrics(client).await?;
            answered(&text, &mut sum);
        }
        Ok(sum)
    }
}

/// The requests an API server's `/metrics` text counts, watches excepted, in all.
pub(crate) fn answered_total(metrics: &str) -> f64 {
    let mut sum = BTreeMap::new();
    answered(metrics, &mut sum);
    sum.values().sum()
}

/// Adds the requests an API server's `/metrics` text counts, watches excepted, to `sum` by verb and
/// resource.
fn answered(metrics: &str, sum: &mut BTreeMap<String, f64>) {
    let lines = (metrics.lines())
        .filter_map(|line| line.strip_prefix("apiserver_request_total{"))
        .filter_map(|rest| rest.rsplit_once("} "));
    for (labels, value) in lines {
        let label = |name: &str| {
            (labels.split(','))
                .find_map(|pair| pair.strip_prefix(name)?.strip_prefix("=\""))
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or_default()
        };
        if label("verb") == "WATCH" {
            continue;
        }
        let kind = match label("subresource") {
            "" => format!("{} {}", label("verb"), label("resource")),
            sub => format!("{} {}/{sub}", label("verb"), label("resource")),
        };
        *sum.entry(kind).or_default() += value.trim().parse::<f64>().unwrap_or(0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_count_every_verb_but_watch_and_paths_too() {
        let text = "# HELP apiserver_request_total x\n\
            apiserver_request_total{code=\"200\",resource=\"leases\",verb=\"PUT\"} 7\n\
            apiserver_request_total{code=\"200\",resource=\"deployments\",verb=\"WATCH\"} 100\n\
            apiserver_request_total{code=\"200\",resource=\"\",verb=\"GET\"} 3\n\
            apiserver_request_total{code=\"409\",resource=\"leases\",verb=\"PUT\"} 2\n\
            apiserver_request_total{code=\"200\",resource=\"deployments\",subresource=\"status\",verb=\"PATCH\"} 4\n\
            apiserver_request_duration_seconds_count{verb=\"GET\"} 50\n";
        let mut sum = BTreeMap::new();
        answered(text, &mut sum);
        let expected = [
            ("GET ".to_owned(), 3.0),
            ("PATCH deployments/status".to_owned(), 4.0),
            ("PUT leases".to_owned(), 9.0),
        ];
        assert_eq!(sum, BTreeMap::from(expected));
    }
}
