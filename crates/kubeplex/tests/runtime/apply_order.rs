//! Children in dependency order on real clusters: a parent that declares a ResourceQuota before the
//! Namespace it lives in converges in every cluster at once, without a failed attempt.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::support::{WAIT, create_namespace, wait_started};
use k8s_openapi::api::core::v1::{Namespace, ResourceQuota, ResourceQuotaSpec};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use kubeplex::{
    Action, Child, ClusterState, Context, ContextName, Controller, Cx, FleetStatus, Manager, Plan,
    Reconcile,
};
use kubeplex_testenv::{Polling, TestEnv, eventually};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A team: a namespace of its own in every child cluster, with a quota in it.
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "test.kubeplex.dev",
    version = "v1",
    kind = "Team",
    namespaced,
    status = "TeamStatus"
)]
pub struct TeamSpec {
    /// The namespace, and the most pods in it.
    namespace: String,
    pods: u32,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct TeamStatus {
    #[serde(flatten)]
    fleet: FleetStatus,
}

/// The suite's clusters, with this module's kinds installed.
pub(crate) async fn env() -> &'static TestEnv {
    crate::support::clusters([("control", Team::crd())]).await
}

const CONTROL: ContextName = ContextName::new("control");
const CHILD_CLUSTERS: [ContextName; 2] =
    [ContextName::new("cluster-a"), ContextName::new("cluster-b")];

struct Teams;

impl Controller for Teams {
    type Resource = Team;
    type Context = ContextName;
    fn plan() -> Plan<ContextName> {
        Plan::new("teams")
            .with_contexts([CONTROL])
            .with_namespaces(["teams"])
            .owns(Child::of::<Namespace>().with_contexts(CHILD_CLUSTERS))
            .owns(Child::of::<ResourceQuota>().with_contexts(CHILD_CLUSTERS))
    }
}

impl Reconcile for Teams {
    type Error = kubeplex::Error;

    /// Declares the quota first, then its namespace: the order a reader of the spec would write.
    async fn reconcile(&self, team: Arc<Team>, cx: &Cx<ContextName>) -> kubeplex::Result<Action> {
        let namespace = &team.spec.namespace;
        for cluster in CHILD_CLUSTERS {
            let quota = ResourceQuota {
                metadata: ObjectMeta {
                    name: Some("team-quota".into()),
                    namespace: Some(namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(ResourceQuotaSpec {
                    hard: Some(BTreeMap::from([(
                        "pods".to_owned(),
                        Quantity(team.spec.pods.to_string()),
                    )])),
                    ..ResourceQuotaSpec::default()
                }),
                ..ResourceQuota::default()
            };
            cx.child(cluster, quota)?;
            let space = Namespace {
                metadata: ObjectMeta {
                    name: Some(namespace.clone()),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            };
            cx.child(cluster, space)?;
        }
        Ok(Action::await_change())
    }
}

#[tokio::test]
async fn a_quota_declared_before_its_namespace_is_ready_in_every_cluster_at_the_first_try() {
    let env = env().await;
    let control = env.client("control").await.unwrap();
    create_namespace(&control, "teams").await;
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .controller(Teams)
        .start()
        .await
        .unwrap();
    wait_started(&running, "teams started").await;
    let teams: Api<Team> = Api::namespaced(control.clone(), "teams");
    let spec = TeamSpec {
        namespace: "team-blue".into(),
        pods: 10,
    };
    teams
        .create(&PostParams::default(), &Team::new("blue", spec))
        .await
        .unwrap();

    let polling = Polling::within(WAIT).every(Duration::from_millis(200));
    let team = eventually("Ready in every cluster", polling, async || {
        let team = teams.get("blue").await.unwrap();
        let fleet = team.status.as_ref().map(|s| &s.fleet);
        let ready = fleet.is_some_and(|fleet| {
            CHILD_CLUSTERS.iter().all(|cluster| {
                fleet
                    .clusters
                    .get(cluster.name())
                    .is_some_and(|c| c.state == ClusterState::Applied && c.children == 2)
            })
        });
        if ready {
            Ok(team)
        } else {
            Err(format!("{fleet:#?}"))
        }
    })
    .await;
    let ready = &team.status.as_ref().unwrap().fleet.conditions[0];
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "AllClustersApplied")
    );

    for cluster in CHILD_CLUSTERS {
        let client = env.client(cluster.name()).await.unwrap();
        let quotas: Api<ResourceQuota> = Api::namespaced(client, "team-blue");
        let quota = quotas.get("team-quota").await.unwrap();
        let hard = quota.spec.and_then(|s| s.hard).unwrap_or_default();
        assert_eq!(hard.get("pods"), Some(&Quantity("10".into())), "{cluster}");
    }
    // Ordered, the first try applied both: no cluster ever failed on the missing namespace.
    let events: Api<Event> = Api::namespaced(control, "teams");
    let failed: Vec<String> = (events.list(&ListParams::default()).await.unwrap().items)
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.uid.clone()) == team.uid())
        .filter(|e| e.reason.as_deref() == Some("ChildApplyFailed"))
        .filter_map(|e| e.note)
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
    crate::support::stop(running).await;
}
