//! What the member sections (`member_join`, `member_churn`) share: the member cluster (one more
//! `kubeplex-testenv` cluster, started when the first of them runs) and its kubeconfig Secret, and one timed
//! join and leave; the operator and its parents are in `fleet.rs`.
//!
//! The operator is the fleet section's kubeplex operator (`__fleet`, as `examples/fleet` is written) with its
//! Deployments declared in every member (`owns(Deployment, members, namespaces = [..])`) and no typed child
//! context; its members come from `KubeconfigSecrets` in the control cluster under `LeavePolicy::Delete`, so
//! each member's Secret carries kubeplex's finalizer until the member's children are deleted. The parent
//! times joins and leaves with its own watch of the member cluster (the fleet section's observer).

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::config::Kubeconfig;
use kube::{Client, CustomResourceExt, ResourceExt};
use kubeplex_testenv::TestEnv;
use serde::Serialize;

use crate::fleet::{FleetApp, Host, Observer, PARENT_NAMESPACE};
use crate::harness::{create_namespace, progress};

/// The member cluster's name in its own environment, its Secret's name and so the member's name.
pub(super) const MEMBER: &str = "member-0";
/// The control cluster: parents, and the members' Secrets.
pub(super) const CONTROL: &str = "cluster-0";
/// Where the members' Secrets live in the control cluster.
pub(super) const SECRETS_NAMESPACE: &str = "bench-members";
/// The label the operator's `KubeconfigSecrets` selects Secrets by.
pub(super) const SELECTOR_LABEL: &str = "bench.kubeplex.dev/member";
/// The image of every parent's children (the observer counts children with it).
pub(super) const IMAGE: &str = "registry.example/app:member";
/// How long one join, one leave or the parents' first reconcile may take before the section fails.
pub(super) const LIMIT: Duration = Duration::from_secs(180);
/// How long children may outlast their member's Secret (whose finalizer kubeplex removes once it deleted
/// them) before they count as left behind.
const STRAY_WAIT: Duration = Duration::from_secs(10);
/// How often the parent looks whether the member's Secret is gone.
const SECRET_POLL: Duration = Duration::from_millis(20);

#[derive(Clone, Debug, Serialize)]
pub(crate) struct MemberOptions {
    /// P parents, each wanting one Deployment in every member (member_join).
    pub parents: usize,
    /// Timed joins, each followed by a timed leave (member_join).
    pub joins: usize,
    /// Children the operator caches while the member is joined (member_churn; rounded up to a multiple
    /// of the section's namespaces).
    pub churn_objects: usize,
    /// Join/leave cycles counted after the warm-up cycle (member_churn).
    pub churn_cycles: usize,
    /// Numbers of members to join at once, the memory per member fitted over them (many_members).
    pub many: Vec<usize>,
    /// Seconds of each count of requests (many_members): several ping intervals (10 s each) for a rate
    /// worth reading.
    pub window_s: u64,
    /// The most windows counted until the rate with members stops falling (many_members).
    pub steady_windows: usize,
    /// Seconds the operator runs untouched before its memory is read with and without members
    /// (many_members).
    pub quiet_s: u64,
    /// How often the operator is asked while its heap settles, in ms (member_churn, many_members).
    pub settle_step_ms: u64,
    /// Whether the heap is read again after the pools' idle timeout and the watches' restart, 5 min
    /// more per size (many_members).
    pub reread_heap: bool,
}

impl MemberOptions {
    pub fn full() -> Self {
        Self {
            parents: 100,
            joins: 5,
            churn_objects: 1000,
            churn_cycles: 10,
            many: vec![100, 300, 1000],
            window_s: 30,
            steady_windows: 4,
            quiet_s: 5,
            settle_step_ms: 250,
            reread_heap: true,
        }
    }

    pub fn quick() -> Self {
        Self {
            parents: 20,
            joins: 2,
            churn_objects: 200,
            churn_cycles: 3,
            many: vec![20, 50],
            window_s: 10,
            steady_windows: 4,
            quiet_s: 5,
            settle_step_ms: 250,
            reread_heap: false,
        }
    }

    /// One join and one counted cycle of one parent per namespace; two sizes of members for the fit. No
    /// quiet time and quick heap readings, which every size and cycle pays several times over.
    pub fn smoke() -> Self {
        Self {
            parents: 2,
            joins: 1,
            churn_objects: 10,
            churn_cycles: 1,
            many: vec![2, 4],
            window_s: 1,
            steady_windows: 1,
            quiet_s: 0,
            settle_step_ms: 50,
            reread_heap: false,
        }
    }
}

/// The member cluster, and how to make it join (create its Secret) and leave (delete it).
pub(crate) struct MemberCluster {
    /// Keeps the member's API server running.
    _env: TestEnv,
    pub(crate) member: Client,
    pub(crate) control: Client,
    secrets: Api<Secret>,
    /// The member's kubeconfig as its Secret holds it.
    kubeconfig: String,
}

/// One leave, timed from the delete of the member's Secret.
#[derive(Clone, Debug)]
pub(super) struct Leave {
    /// Until the parent's watch of the member saw no child left; NaN when some were left behind.
    pub children_gone_s: f64,
    /// Until the Secret was gone (kubeplex removed its finalizer after the cleanup).
    pub secret_gone_s: f64,
    /// Children still in the member [`STRAY_WAIT`] after the Secret was gone (the parent then deleted them).
    pub stray: Vec<Stray>,
}

/// A child a leave left behind.
#[derive(Clone, Debug)]
pub(super) struct Stray {
    pub namespace: String,
    pub name: String,
    /// Its UID is not the one it had before the leave: it was created again after the leave began (rather
    /// than never deleted).
    pub recreated: bool,
}

/// A note per leave that left children behind, the leaves numbered from `first` in the order given.
pub(super) fn stray_notes<'a>(
    first: usize,
    leaves: impl Iterator<Item = &'a [Stray]>,
) -> Vec<String> {
    leaves
        .enumerate()
        .filter(|(_, stray)| !stray.is_empty())
        .map(|(i, stray)| {
            let named: Vec<String> = stray.iter().map(ToString::to_string).collect();
            format!(
                "leave {}: {} child(ren) still in the member 10 s after its Secret was gone: {}",
                i + first,
                stray.len(),
                named.join("; ")
            )
        })
        .collect()
}

impl std::fmt::Display for Stray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how = if self.recreated {
            "created again during the leave (new UID)"
        } else {
            "never deleted (same UID)"
        };
        write!(f, "{}/{}: {how}", self.namespace, self.name)
    }
}

impl MemberCluster {
    /// Starts the member cluster; readies the control cluster (the parents' kind, the Secrets' namespace).
    pub async fn start(host: &Host<'_>) -> Result<Self, String> {
        progress(&format!("members: starting the member cluster {MEMBER}"));
        let started = Instant::now();
        let env = TestEnv::builder()
            .cluster(MEMBER)
            .start()
            .await
            .map_err(|e| format!("starting the member cluster: {e}"))?;
        progress(&format!(
            "members: {MEMBER} started in {:.1} s",
            started.elapsed().as_secs_f64()
        ));
        let member = env.client(MEMBER).await.map_err(|e| e.to_string())?;
        let kubeconfig = single_context(env.kubeconfig(), MEMBER)?;
        host.env
            .install_crd(CONTROL, FleetApp::crd())
            .await
            .map_err(|e| e.to_string())?;
        let control = host.env.client(CONTROL).await.map_err(|e| e.to_string())?;
        create_namespace(&control, SECRETS_NAMESPACE).await?;
        create_namespace(&control, PARENT_NAMESPACE).await?;
        Ok(Self {
            _env: env,
            member,
            secrets: Api::namespaced(control.clone(), SECRETS_NAMESPACE),
            control,
            kubeconfig,
        })
    }

    pub async fn create_namespaces(&self, namespaces: &[String]) -> Result<(), String> {
        for namespace in namespaces {
            create_namespace(&self.member, namespace).await?;
        }
        Ok(())
    }

    /// The member's Secret, as a platform team registers a cluster.
    fn secret(&self) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some(MEMBER.to_owned()),
                labels: Some([(SELECTOR_LABEL.to_owned(), "true".to_owned())].into()),
                ..ObjectMeta::default()
            },
            string_data: Some([("kubeconfig".to_owned(), self.kubeconfig.clone())].into()),
            ..Secret::default()
        }
    }

    /// Creates the member's Secret and waits until every one of `children` children exists in the member
    /// (with the parents' image); the seconds from the create.
    pub async fn join(&self, observer: &Observer, children: usize) -> Result<f64, String> {
        let from = Instant::now();
        self.secrets
            .create(&PostParams::default(), &self.secret())
            .await
            .map_err(|e| format!("creating the member's Secret: {e}"))?;
        let at = observer
            .until("every child in the member", LIMIT, |w| w.good == children)
            .await?;
        Ok((at - from).as_secs_f64())
    }

    /// Deletes the member's Secret and waits until no child is left in the member and the Secret is gone.
    /// Children still there [`STRAY_WAIT`] after the Secret went are named in the result and deleted by
    /// hand, so that the next join starts from an empty member.
    pub(super) async fn leave(&self, observer: &Observer) -> Result<Leave, String> {
        let before = observer.with(|w| w.uids());
        let from = Instant::now();
        self.secrets
            .delete(MEMBER, &DeleteParams::default())
            .await
            .map_err(|e| format!("deleting the member's Secret: {e}"))?;
        let (gone, mut secret_went) = tokio::sync::watch::channel(None);
        let secret = async {
            let at = self.secret_gone().await;
            gone.send_replace(at.as_ref().ok().copied());
            at
        };
        let children = async {
            let strays_after = async {
                let Ok(went) = secret_went.wait_for(Option::is_some).await else {
                    return std::future::pending().await;
                };
                let went = went.unwrap_or_else(Instant::now);
                tokio::time::sleep_until((went + STRAY_WAIT).into()).await;
            };
            tokio::select! {
                at = observer.until("no child left in the member", LIMIT, |w| w.children() == 0) => at.ok(),
                () = strays_after => None,
            }
        };
        let (secret_at, children_at) = tokio::join!(secret, children);
        let secret_gone_s = (secret_at? - from).as_secs_f64();
        if let Some(at) = children_at {
            return Ok(Leave {
                children_gone_s: (at - from).as_secs_f64(),
                secret_gone_s,
                stray: Vec::new(),
            });
        }
        let stray: Vec<Stray> = observer
            .with(|w| w.uids())
            .into_iter()
            .map(|(key, uid)| {
                let recreated = before.get(&key) != Some(&uid);
                let (_, namespace, name) = key;
                Stray {
                    namespace,
                    name,
                    recreated,
                }
            })
            .collect();
        progress(&format!(
            "members: {} child(ren) left behind {STRAY_WAIT:?} after the member's Secret was gone: {}",
            stray.len(),
            stray
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        ));
        for child in &stray {
            let api: Api<Deployment> = Api::namespaced(self.member.clone(), &child.namespace);
            match api.delete(&child.name, &DeleteParams::background()).await {
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                other => drop(other.map_err(|e| format!("deleting {child}: {e}"))?),
            }
        }
        observer
            .until("the children left behind gone", LIMIT, |w| {
                w.children() == 0
            })
            .await?;
        Ok(Leave {
            children_gone_s: f64::NAN,
            secret_gone_s,
            stray,
        })
    }

    async fn secret_gone(&self) -> Result<Instant, String> {
        let deadline = Instant::now() + LIMIT;
        loop {
            let secret = self
                .secrets
                .get_opt(MEMBER)
                .await
                .map_err(|e| format!("reading the member's Secret: {e}"))?;
            if secret.is_none() {
                return Ok(Instant::now());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the member's Secret was still there {LIMIT:?} after its delete (finalizers {:?})",
                    secret.map(|s| s.finalizers().to_vec())
                ));
            }
            tokio::time::sleep(SECRET_POLL).await;
        }
    }
}

/// The kubeconfig a member's Secret holds: `context`, its cluster and its user, nothing of the other
/// clusters; current. As JSON, which is YAML (kubeplex reads it with `Kubeconfig::from_yaml`).
pub(super) fn single_context(kubeconfig: &Kubeconfig, context: &str) -> Result<String, String> {
    let named = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context)
        .ok_or_else(|| format!("the kubeconfig has no context {context}"))?;
    let inner = named
        .context
        .as_ref()
        .ok_or_else(|| format!("context {context} is empty"))?;
    let cluster = kubeconfig
        .clusters
        .iter()
        .find(|c| c.name == inner.cluster)
        .ok_or_else(|| format!("the kubeconfig has no cluster {}", inner.cluster))?;
    let user = kubeconfig
        .auth_infos
        .iter()
        .filter(|a| inner.user.as_ref() == Some(&a.name));
    let single = Kubeconfig {
        clusters: vec![cluster.clone()],
        auth_infos: user.cloned().collect(),
        contexts: vec![named.clone()],
        current_context: Some(context.to_owned()),
        kind: Some("Config".to_owned()),
        api_version: Some("v1".to_owned()),
        ..Kubeconfig::default()
    };
    serde_json::to_string_pretty(&single).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secrets_kubeconfig_holds_one_context_and_reads_back() {
        let kubeconfig: Kubeconfig = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                { "name": "a", "cluster": { "server": "https://127.0.0.1:1" } },
                { "name": "b", "cluster": { "server": "https://127.0.0.1:2" } },
            ],
            "users": [
                { "name": "a-admin", "user": { "token": "ta" } },
                { "name": "b-admin", "user": { "token": "tb" } },
            ],
            "contexts": [
                { "name": "a", "context": { "cluster": "a", "user": "a-admin" } },
                { "name": "b", "context": { "cluster": "b", "user": "b-admin" } },
            ],
            "current-context": "a",
        }))
        .unwrap();
        let text = single_context(&kubeconfig, "b").unwrap();
        let read = Kubeconfig::from_yaml(&text).unwrap();
        assert_eq!(read.current_context.as_deref(), Some("b"));
        let names = |v: Vec<&str>| v.into_iter().map(String::from).collect::<Vec<_>>();
        assert_eq!(
            read.clusters
                .iter()
                .map(|c| c.name.clone())
                .collect::<Vec<_>>(),
            names(vec!["b"])
        );
        assert_eq!(
            read.auth_infos
                .iter()
                .map(|a| a.name.clone())
                .collect::<Vec<_>>(),
            names(vec!["b-admin"])
        );
        assert!(text.contains("tb") && !text.contains("\"ta\""), "{text}");
        assert!(single_context(&kubeconfig, "c").is_err());
    }
}
