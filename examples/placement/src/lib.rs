//! A placement operator that decides from the state of the whole fleet: each `Placement` in the control
//! cluster runs its Deployment in the `spec.clusters` clusters whose Ready, schedulable Nodes have the most
//! allocatable CPU — among the typed contexts cluster-a and cluster-b and every member that joins — and
//! moves it when those Nodes go NotReady or are cordoned, when a cluster stops answering, or when a
//! cluster with more CPU joins.
//!
//! It polls nothing: the Nodes of every cluster are watched (`watches(Node, ..)`), each change of one
//! reconciles every Placement, a cluster that stops answering does too, and the reconcile reads the Nodes
//! from the caches (`cx.cached`), members' included. The `apps` Namespace is every Placement's child where
//! it runs, shared (`owns(Namespace, .., shared)`): created by the first, left in place by the last.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, Namespace, Node, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::ObjectMeta;
use kube::{CustomResource, ResourceExt};
use kubeplex::prelude::*;
use kubeplex::readiness::ClusterReadiness;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

kubeplex::contexts! {
    /// The clusters the operator was built for; members join at run time beside them.
    pub enum Fleet {
        Control = "control",
        ClusterA = "cluster-a",
        ClusterB = "cluster-b",
    }
}

/// Where Placements live in the control cluster.
pub const PLACEMENTS: &str = "placements";

/// Where the Deployments go in the chosen clusters.
pub const APPS: &str = "apps";

/// A workload to run in the clusters with the most free CPU.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "placement.kubeplex.dev",
    version = "v1",
    kind = "Placement",
    namespaced,
    status = "PlacementStatus"
)]
pub struct PlacementSpec {
    /// The container image.
    pub image: String,
    /// How many clusters run it.
    #[schemars(range(min = 1))]
    pub clusters: u32,
}

/// Where the Deployment was placed, beside each cluster's state and its Deployment's health as kubeplex
/// writes them; both in one write.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PlacementStatus {
    #[serde(flatten)]
    pub fleet: FleetStatus,
    /// The clusters chosen, most free CPU first.
    #[serde(default)]
    pub placed: Vec<String>,
}

/// Places each Placement's Deployment.
#[controller(
    crd = Placement,
    contexts = [Fleet::Control],
    namespaces = ["placements"],
    owns(
        Namespace, contexts = [Fleet::ClusterA, Fleet::ClusterB], members,
        shared, prune = keep, on_delete = orphan,
    ),
    owns(Deployment, contexts = [Fleet::ClusterA, Fleet::ClusterB], members, namespaces = ["apps"]),
    watches(Node, contexts = [Fleet::ClusterA, Fleet::ClusterB], members),
)]
pub struct Placer;

impl Reconcile for Placer {
    type Error = kubeplex::Error;

    async fn reconcile(
        &self,
        placement: Arc<Placement>,
        cx: &Cx<Fleet>,
    ) -> Result<Action, Self::Error> {
        let chosen = choose(&placement, cx)?;
        let placed: Vec<&str> = chosen.iter().map(Cluster::name).collect();
        cx.set_status(serde_json::json!({ "placed": placed }))?;
        for cluster in chosen {
            // Every Placement there declares it; a Namespace outlives them (others may put things in it).
            cx.child(cluster.clone(), apps_namespace())?;
            cx.child(cluster, deployment(&placement))?;
        }
        // Every Deployment not declared this time is removed: moving is declaring it elsewhere.
        Ok(Action::await_change())
    }
}

/// The `spec.clusters` clusters with the most free CPU, most first (a tie goes to the first by name);
/// clusters that do not answer, and members that are leaving, are not candidates.
pub fn choose(placement: &Placement, cx: &Cx<Fleet>) -> kubeplex::Result<Vec<Cluster<Fleet>>> {
    let failing: Vec<Cluster<Fleet>> = (cx.clusters().into_iter())
        .filter(|(_, report)| report.status == ClusterReadiness::Failing || leaving(report))
        .map(|(cluster, _)| cluster)
        .collect();
    let mut candidates = Vec::new();
    for cluster in cx.clusters_of::<Deployment>() {
        if failing.contains(&cluster) {
            continue;
        }
        let cpu = free_cpu(&cx.cached::<Node>(cluster.clone())?);
        if cpu > 0.0 {
            candidates.push((cpu, cluster));
        }
    }
    candidates.sort_by(|(a, x), (b, y)| b.total_cmp(a).then_with(|| x.name().cmp(y.name())));
    let wanted = usize::try_from(placement.spec.clusters).unwrap_or(usize::MAX);
    Ok(candidates
        .into_iter()
        .take(wanted)
        .map(|(_, c)| c)
        .collect())
}

/// Whether a member's report says it is leaving the fleet.
fn leaving(report: &kubeplex::readiness::ClusterReport) -> bool {
    report
        .member
        .as_ref()
        .is_some_and(|m| m.phase == kubeplex::readiness::MemberPhase::Leaving)
}

/// The allocatable CPU of the Nodes that are Ready and not cordoned, in cores.
pub fn free_cpu(nodes: &[Arc<Node>]) -> f64 {
    nodes
        .iter()
        .filter(|node| schedulable(node))
        .filter_map(|node| {
            node.status
                .as_ref()?
                .allocatable
                .as_ref()?
                .get("cpu")
                .map(cores)
        })
        .sum()
}

/// Ready (its `Ready` condition `True`) and not cordoned (`spec.unschedulable`).
fn schedulable(node: &Node) -> bool {
    let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    let ready = conditions
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    ready && !cordoned
}

/// A CPU quantity in cores: `4`, `3500m`; anything else (a Node's status is anyone's with the right to
/// write it: `inf`, `-8`, `NaN`) counts as none.
fn cores(quantity: &Quantity) -> f64 {
    let text = quantity.0.as_str();
    let cores = match text.strip_suffix('m') {
        Some(milli) => milli.parse::<f64>().map_or(0.0, |m| m / 1000.0),
        None => text.parse().unwrap_or(0.0),
    };
    if cores.is_finite() && cores > 0.0 {
        cores
    } else {
        0.0
    }
}

/// The Namespace the Deployments run in, the same for every Placement.
pub fn apps_namespace() -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(APPS.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    }
}

/// The Deployment a Placement runs, named after it.
pub fn deployment(placement: &Placement) -> Deployment {
    let name = placement.name_any();
    let labels: std::collections::BTreeMap<String, String> =
        [("app".to_owned(), name.clone())].into();
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(APPS.into()),
            ..ObjectMeta::default()
        },
        spec: DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "app".into(),
                        image: Some(placement.spec.image.clone()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        },
        ..Deployment::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_quantities_are_read_in_cores() {
        assert_eq!(cores(&Quantity("4".into())), 4.0);
        assert_eq!(cores(&Quantity("3500m".into())), 3.5);
        assert_eq!(cores(&Quantity("lots".into())), 0.0);
        for hostile in ["inf", "-8", "NaN", "1e400"] {
            assert_eq!(cores(&Quantity(hostile.into())), 0.0, "{hostile}");
        }
    }
}
