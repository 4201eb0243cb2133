//! The tests' parent (a `Workload` wanting Deployments, Jobs, Widgets, ConfigMaps and the other kinds with
//! a built-in health rule in cluster-a, in a namespace of its parent's name), the custom kind `Widget` judged by kstatus, a user rule for the
//! ConfigMaps, and one controller of Workloads per test.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec, Deployment, DeploymentSpec};
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec, StatefulSet, StatefulSetSpec};
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Container, PodSpec, PodTemplateSpec};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimSpec};
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec, VolumeResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::ObjectMeta;
use kube::{CustomResource, ResourceExt};
use kubeplex::{
    Action, Child, ContextName, Controller, Cx, FleetStatus, health::Assessment, health::Health,
};
use kubeplex::{Plan, Reconcile, health::Projection};
use parking_lot::Mutex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const CONTROL: ContextName = ContextName::new("control");
pub const CLUSTER_A: ContextName = ContextName::new("cluster-a");

/// A parent whose spec lists its children in cluster-a, in the namespace named as its own.
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "test.kubeplex.dev",
    version = "v1",
    kind = "Workload",
    namespaced,
    status = "WorkloadStatus"
)]
pub struct WorkloadSpec {
    #[serde(default)]
    pub deployments: Vec<String>,
    #[serde(default)]
    pub jobs: Vec<String>,
    #[serde(default)]
    pub widgets: Vec<String>,
    /// ConfigMaps judged by [`labelled_ready`].
    #[serde(default)]
    pub configs: Vec<String>,
    #[serde(default)]
    pub stateful_sets: Vec<String>,
    #[serde(default)]
    pub daemon_sets: Vec<String>,
    #[serde(default)]
    pub replica_sets: Vec<String>,
    #[serde(default)]
    pub claims: Vec<String>,
    /// Services of type `LoadBalancer`.
    #[serde(default)]
    pub load_balancers: Vec<String>,
    #[serde(default)]
    pub pods: Vec<String>,
    #[serde(default)]
    pub cron_jobs: Vec<String>,
    /// Whether the CronJobs are suspended.
    #[serde(default)]
    pub cron_suspended: bool,
    /// HorizontalPodAutoscalers, each scaling a Deployment of its name.
    #[serde(default)]
    pub autoscalers: Vec<String>,
    /// PodDisruptionBudgets.
    #[serde(default)]
    pub budgets: Vec<String>,
    #[serde(default)]
    pub ingresses: Vec<String>,
    /// CustomResourceDefinitions (cluster-scoped).
    #[serde(default)]
    pub definitions: Vec<Definition>,
    /// APIServices (cluster-scoped), each for a Service of that name in the parent's namespace.
    #[serde(default)]
    pub api_services: Vec<String>,
}

/// A CustomResourceDefinition child: its plural and kind in the group `gadgets.test.kubeplex.dev`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct Definition {
    pub plural: String,
    pub kind: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct WorkloadStatus {
    #[serde(flatten)]
    pub fleet: FleetStatus,
}

/// A custom kind in cluster-a whose health only kstatus' rule can tell.
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "health.test.kubeplex.dev",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus"
)]
pub struct WidgetSpec {
    #[serde(default)]
    pub size: u32,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    #[serde(default)]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub conditions: Vec<WidgetCondition>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct WidgetCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
}

/// The user's rule for ConfigMaps: healthy once someone labels it `ready=yes`.
pub fn labelled_ready(child: &Projection) -> Assessment {
    let labels = child.metadata.labels.as_ref();
    match labels.and_then(|l| l.get("ready")).map(String::as_str) {
        Some("yes") => Assessment::healthy("labelled ready"),
        Some(other) => Assessment::degraded(format!("labelled ready={other}")),
        None => Assessment::progressing("waiting for the ready label"),
    }
}

/// What each reconcile of a parent read through `cx.children::<Deployment>(cluster-a)`: by parent name,
/// (child, health, reason) of the last one.
pub static SEEN_BY_CX: LazyLock<Mutex<BTreeMap<String, Seen>>> = LazyLock::new(Mutex::default);

/// The parent's children as one reconcile read them: (child, health, reason).
pub type Seen = Vec<(String, Health, String)>;

pub fn meta(name: &str, namespace: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        ..ObjectMeta::default()
    }
}

pub fn selector(name: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some([("app".to_owned(), name.to_owned())].into()),
        ..LabelSelector::default()
    }
}

/// A pod template for a workload whose pods run for good (restart policy left to its default, `Always`).
fn serving_pod(name: &str) -> PodTemplateSpec {
    let mut template = pod(name);
    if let Some(spec) = template.spec.as_mut() {
        spec.restart_policy = None;
    }
    template
}

pub fn pod(name: &str) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some([("app".to_owned(), name.to_owned())].into()),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".into(),
                image: Some("registry.example/app:1".into()),
                ..Container::default()
            }],
            restart_policy: Some("Never".into()),
            ..PodSpec::default()
        }),
    }
}

pub async fn reconcile_workload(
    parent: Arc<Workload>,
    cx: &Cx<ContextName>,
) -> Result<Action, kubeplex::Error> {
    let namespace = parent.namespace().unwrap_or_default();
    let seen = cx.children::<Deployment>(CLUSTER_A);
    let seen = seen
        .into_iter()
        .map(|c| (c.full_name(), c.health, c.reason));
    SEEN_BY_CX.lock().insert(parent.name_any(), seen.collect());
    for name in &parent.spec.deployments {
        let deployment = Deployment {
            metadata: meta(name, &namespace),
            spec: DeploymentSpec {
                replicas: Some(3),
                selector: selector(name),
                template: serving_pod(name),
                ..DeploymentSpec::default()
            },
            ..Deployment::default()
        };
        cx.child(CLUSTER_A, deployment)?;
    }
    other_children(&parent.spec, &namespace, cx)?;
    for name in &parent.spec.jobs {
        let job = Job {
            metadata: meta(name, &namespace),
            spec: Some(JobSpec {
                template: pod(name),
                ..JobSpec::default()
            }),
            ..Job::default()
        };
        cx.child(CLUSTER_A, job)?;
    }
    for name in &parent.spec.widgets {
        let mut widget = Widget::new(name, WidgetSpec { size: 1 });
        widget.metadata.namespace = Some(namespace.clone());
        cx.child(CLUSTER_A, widget)?;
    }
    for name in &parent.spec.configs {
        let config = ConfigMap {
            metadata: meta(name, &namespace),
            ..ConfigMap::default()
        };
        cx.child(CLUSTER_A, config)?;
    }
    Ok(Action::await_change())
}

/// The children of the kinds with a built-in rule other than Deployments' and Jobs'.
fn other_children(
    spec: &WorkloadSpec,
    namespace: &str,
    cx: &Cx<ContextName>,
) -> Result<(), kubeplex::Error> {
    for name in &spec.stateful_sets {
        let set = StatefulSet {
            metadata: meta(name, namespace),
            spec: StatefulSetSpec {
                replicas: Some(3),
                selector: selector(name),
                template: serving_pod(name),
                ..StatefulSetSpec::default()
            },
            ..StatefulSet::default()
        };
        cx.child(CLUSTER_A, set)?;
    }
    for name in &spec.daemon_sets {
        let set = DaemonSet {
            metadata: meta(name, namespace),
            spec: DaemonSetSpec {
                selector: selector(name),
                template: serving_pod(name),
                ..DaemonSetSpec::default()
            },
            ..DaemonSet::default()
        };
        cx.child(CLUSTER_A, set)?;
    }
    for name in &spec.replica_sets {
        let set = ReplicaSet {
            metadata: meta(name, namespace),
            spec: ReplicaSetSpec {
                replicas: Some(3),
                selector: selector(name),
                template: Some(serving_pod(name)),
                ..ReplicaSetSpec::default()
            },
            ..ReplicaSet::default()
        };
        cx.child(CLUSTER_A, set)?;
    }
    for name in &spec.claims {
        let claim = PersistentVolumeClaim {
            metadata: meta(name, namespace),
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                resources: Some(VolumeResourceRequirements {
                    requests: Some([("storage".to_owned(), Quantity("1Gi".into()))].into()),
                    ..VolumeResourceRequirements::default()
                }),
                ..PersistentVolumeClaimSpec::default()
            }),
            ..PersistentVolumeClaim::default()
        };
        cx.child(CLUSTER_A, claim)?;
    }
    for name in &spec.load_balancers {
        let service = Service {
            metadata: meta(name, namespace),
            spec: Some(ServiceSpec {
                type_: Some("LoadBalancer".into()),
                selector: Some([("app".to_owned(), name.clone())].into()),
                ports: Some(vec![ServicePort {
                    port: 80,
                    ..ServicePort::default()
                }]),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        };
        cx.child(CLUSTER_A, service)?;
    }
    Ok(())
}

/// A controller of Workloads in `control`, namespace `$namespace`, with every kind of child in cluster-a.
macro_rules! workload_controller {
    ($name:ident, $controller:literal, $namespace:literal) => {
        pub struct $name;

        impl Controller for $name {
            type Resource = Workload;
            type Context = ContextName;
            fn plan() -> Plan<ContextName> {
                let child_namespace = [$namespace];
                Plan::new($controller)
                    .with_contexts([CONTROL])
                    .with_namespaces([$namespace])
                    .owns(
                        Child::of::<Deployment>()
                            .with_contexts([CLUSTER_A])
                            .with_namespaces(child_namespace),
                    )
                    .owns(
                        Child::of::<Job>()
                            .with_contexts([CLUSTER_A])
                            .with_namespaces(child_namespace),
                    )
                    .owns(
                        Child::of::<Widget>()
                            .with_contexts([CLUSTER_A])
                            .with_namespaces(child_namespace),
                    )
                    .owns(
                        Child::of::<ConfigMap>()
                            .with_contexts([CLUSTER_A])
                            .with_namespaces(child_namespace)
                            .with_health(labelled_ready),
                    )
                    .owns(
                        Child::of::<StatefulSet>()
                            .with_contexts([CLUSTER_A])
                            .with_namespaces(child_namespace),
                    )
                    .owns(
                        Child::of::<DaemonSet>()
                            .with_contexts([CLUSTER_A])
                            .with_namespaces(child_namespace),
                    )
                    .owns(
                        Child::of::<ReplicaSet>()
                            .with_contexts([CLUSTER_A])
                            .with_namespaces(child_namespace),
                    )
                    .owns(
                        Child::of::<PersistentVolumeClaim>()
                            .with_contexts([CLUSTER_A])
                            .with_namespaces(child_namespace),
                    )
                    .owns(
                        Child::of::<Service>()
                            .with_contexts([CLUSTER_A])
                            .with_namespaces(child_namespace),
                    )
            }
        }

        impl Reconcile for $name {
            type Error = kubeplex::Error;
            async fn reconcile(
                &self,
                parent: Arc<Workload>,
                cx: &Cx<ContextName>,
            ) -> Result<Action, kubeplex::Error> {
                reconcile_workload(parent, cx).await
            }
        }
    };
}

workload_controller!(Deployments, "health-deployments", "health-deployments");
workload_controller!(Jobs, "health-jobs", "health-jobs");
workload_controller!(SuspendedJobs, "health-suspended", "health-suspended");
workload_controller!(Widgets, "health-widgets", "health-widgets");
workload_controller!(Configs, "health-configs", "health-configs");
workload_controller!(Unreachable, "health-unreachable", "health-unreachable");
workload_controller!(Others, "health-others", "health-others");
workload_controller!(RealController, "health-real", "health-real");
