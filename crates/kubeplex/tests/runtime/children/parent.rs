//! The tests' parent: its CRD, its reconcile (ConfigMap children in cluster-a, on demand a failure or a
//! condition of its own), the contexts, and one controller of Parents per test.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use kube::{CustomResource, ResourceExt};
use kubeplex::{Action, Child, ContextName, Controller, Cx, FleetStatus, Plan, Reconcile};
use parking_lot::Mutex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A parent whose spec lists the ConfigMaps it wants in `cluster-a`, namespace `kids`.
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "test.kubeplex.dev",
    version = "v1",
    kind = "Parent",
    namespaced,
    status = "ParentStatus"
)]
pub struct ParentSpec {
    /// The names of the wanted children.
    #[serde(default)]
    pub children: Vec<String>,
    /// Fail the reconcile with a real API error.
    #[serde(default)]
    pub fail: bool,
    /// A condition type the reconciler itself writes into the status.
    #[serde(default)]
    pub own_condition: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct ParentStatus {
    #[serde(flatten)]
    pub fleet: FleetStatus,
}

pub const CONTROL: ContextName = ContextName::new("control");
pub const CLUSTER_A: ContextName = ContextName::new("cluster-a");
/// A context name as EKS writes them, remapped to the test cluster `control`.
pub const ARN: ContextName = ContextName::new("arn:aws:eks:eu-west-1:123456789012:cluster/prod");

/// What the user's reconcile can fail with: its message embeds kube's, as many users' errors do.
#[derive(Debug, thiserror::Error)]
pub enum ParentError {
    #[error("reading the settings failed: {0}")]
    Settings(#[from] kube::Error),
    #[error(transparent)]
    Kubeplex(#[from] kubeplex::Error),
}

/// How many reconciles of each parent (`namespace/name`) began.
static RECONCILES: Mutex<BTreeMap<String, usize>> = Mutex::new(BTreeMap::new());

fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// How many reconciles of the parent `namespace/name` began so far.
pub fn reconciles(namespace: &str, name: &str) -> usize {
    RECONCILES
        .lock()
        .get(&key(namespace, name))
        .copied()
        .unwrap_or(0)
}

pub async fn reconcile_parent(
    parent: Arc<Parent>,
    cx: &Cx<ContextName>,
) -> Result<Action, ParentError> {
    let namespace = parent.namespace().unwrap_or_default();
    *RECONCILES
        .lock()
        .entry(key(&namespace, &parent.name_any()))
        .or_default() += 1;
    if let Some(condition) = &parent.spec.own_condition {
        // The user's own condition, applied with its own field manager.
        let api: Api<Parent> = Api::namespaced(cx.client(cx.cluster())?, &namespace);
        let status = serde_json::json!({
            "apiVersion": "test.kubeplex.dev/v1", "kind": "Parent",
            "status": { "conditions": [{
                "type": condition, "status": "True", "reason": "Mine", "message": "set by the reconciler",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }]},
        });
        api.patch_status(
            &parent.name_any(),
            &PatchParams::apply("user-reconciler").force(),
            &Patch::Apply(&status),
        )
        .await?;
    }
    // After the user's condition, so that it is written whether or not the reconcile fails.
    if parent.spec.fail {
        let api: Api<ConfigMap> = cx.api(cx.cluster(), &namespace)?;
        api.get("settings-that-do-not-exist").await?;
    }
    for name in &parent.spec.children {
        cx.child(CLUSTER_A, child(name, "kids", &parent))?;
    }
    Ok(Action::await_change())
}

/// The ConfigMap `namespace/name` a parent declares, saying which parent it is from.
pub fn child(name: &str, namespace: &str, parent: &Parent) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some([("from".to_owned(), parent.name_any())].into()),
        ..ConfigMap::default()
    }
}

/// A controller of Parents in `$cluster`, namespace `$namespace`, with ConfigMap children in cluster-a.
macro_rules! parent_controller {
    ($name:ident, $controller:literal, $cluster:expr, $namespace:literal) => {
        pub struct $name;

        impl Controller for $name {
            type Resource = Parent;
            type Context = ContextName;
            fn plan() -> Plan<ContextName> {
                Plan::new($controller)
                    .with_contexts([$cluster])
                    .with_namespaces([$namespace])
                    .owns(
                        Child::of::<ConfigMap>()
                            .with_contexts([CLUSTER_A])
                            .with_namespaces(["kids"]),
                    )
            }
        }

        impl Reconcile for $name {
            type Error = ParentError;
            async fn reconcile(
                &self,
                parent: Arc<Parent>,
                cx: &Cx<ContextName>,
            ) -> Result<Action, ParentError> {
                reconcile_parent(parent, cx).await
            }
        }
    };
}

/// A controller of Parents in namespace `$namespace` of control, each with the ConfigMaps its spec names in
/// namespace `$kids` of every context of `$contexts`, `{cluster}` in a name replaced by the context's.
macro_rules! config_map_parents {
    ($name:ident, $controller:literal, $namespace:literal, [$($context:expr),+], $kids:expr) => {
        struct $name;

        impl ::kubeplex::Controller for $name {
            type Resource = $crate::children::parent::Parent;
            type Context = ::kubeplex::ContextName;
            fn plan() -> ::kubeplex::Plan<::kubeplex::ContextName> {
                ::kubeplex::Plan::new($controller)
                    .with_contexts([$crate::children::parent::CONTROL])
                    .with_namespaces([$namespace])
                    .owns(
                        ::kubeplex::Child::of::<::k8s_openapi::api::core::v1::ConfigMap>()
                            .with_contexts([$($context),+])
                            .with_namespaces([$kids]),
                    )
            }
        }

        impl ::kubeplex::Reconcile for $name {
            type Error = $crate::children::parent::ParentError;
            async fn reconcile(
                &self,
                parent: ::std::sync::Arc<$crate::children::parent::Parent>,
                cx: &::kubeplex::Cx<::kubeplex::ContextName>,
            ) -> Result<::kubeplex::Action, $crate::children::parent::ParentError> {
                use ::kubeplex::Context as _;
                for cluster in [$($context),+] {
                    for name in &parent.spec.children {
                        let name = name.replace("{cluster}", cluster.name());
                        let child = $crate::children::parent::child(&name, $kids, &parent);
                        cx.child(cluster, child)?;
                    }
                }
                Ok(::kubeplex::Action::await_change())
            }
        }
    };
}
pub(crate) use config_map_parents;

parent_controller!(StatusWriters, "status-writers", CONTROL, "status-writers");
parent_controller!(Failing, "failing", CONTROL, "failing");
parent_controller!(Conflicts, "conflicts", CONTROL, "conflicts");
parent_controller!(Slashes, "slashes", ARN, "slashes");
parent_controller!(Narrowing, "narrowing", CONTROL, "narrowing");
