//! What the member tests (`members`, `member_providers`) reconcile: a `Spread` parent in `control`,
//! and one ConfigMap child per parent in cluster-a (typed) and in every member, in namespace `apps`. Each
//! test declares its own controller with [`spreader!`], watching its own namespace, so the tests share the
//! clusters and nothing else.
#![allow(dead_code)] // Each test binary uses a different part.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{CustomResource, ResourceExt};
use kubeplex::FleetStatus;
use kubeplex_testenv::TestEnv;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::support::{WAIT, create_namespace};

/// An app to spread over the fleet: a ConfigMap in cluster-a and in every member.
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "test.kubeplex.dev",
    version = "v1",
    kind = "Spread",
    namespaced,
    status = "SpreadStatus"
)]
pub struct SpreadSpec {
    pub value: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct SpreadStatus {
    #[serde(flatten)]
    pub fleet: FleetStatus,
    /// The reconcile's own field, written with kubeplex's part (`Cx::set_status`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Where the children live in cluster-a and in each member.
pub const APPS: &str = "apps";

/// The child every parent wants everywhere ConfigMaps live: named `<parent>-<controller>`, holding the
/// parent's value.
pub fn child(parent: &Spread, controller: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("{}-{controller}", parent.name_any())),
            ..ObjectMeta::default()
        },
        data: Some([("value".to_owned(), parent.spec.value.clone())].into()),
        ..ConfigMap::default()
    }
}

/// A controller `$name` of the Spreads in namespace `$namespace`, whose children go to cluster-a and to
/// every member. Expanded where `Spread`, `ConfigMap`, `Fleet` and kubeplex's prelude are in scope.
macro_rules! spreader {
    ($name:ident, $namespace:literal) => {
        #[controller(
                    crd = Spread,
                    contexts = [Fleet::Control],
                    namespaces = [$namespace],
                    owns(ConfigMap, members, contexts = [Fleet::ClusterA], namespaces = ["apps"]),
                )]
        struct $name;

        impl Reconcile for $name {
            type Error = kubeplex::Error;

            async fn reconcile(
                &self,
                parent: std::sync::Arc<Spread>,
                cx: &Cx<Fleet>,
            ) -> Result<Action, Self::Error> {
                for target in cx.clusters_of::<ConfigMap>() {
                    cx.child(target, crate::spread::child(&parent, cx.controller()))?;
                }
                Ok(Action::await_change())
            }
        }
    };
}
pub(crate) use spreader;

/// Namespace `apps` in cluster-a and cluster-c.
pub async fn prepare(env: &TestEnv) {
    for cluster in ["cluster-a", "cluster-c"] {
        create_namespace(&env.client(cluster).await.unwrap(), APPS).await;
    }
}

async fn spreads(env: &TestEnv, namespace: &str) -> Api<Spread> {
    Api::namespaced(env.client("control").await.unwrap(), namespace)
}

/// The parent `namespace/name` with value `v1` (and its namespace).
pub async fn create_spread(env: &TestEnv, namespace: &str, name: &str) {
    create_namespace(&env.client("control").await.unwrap(), namespace).await;
    let spread = Spread::new(name, SpreadSpec { value: "v1".into() });
    let api = spreads(env, namespace).await;
    api.create(&PostParams::default(), &spread).await.unwrap();
}

/// Changes the parent's value: every child should follow.
pub async fn set_value(env: &TestEnv, namespace: &str, name: &str, value: &str) {
    let patch = serde_json::json!({ "spec": { "value": value } });
    let api = spreads(env, namespace).await;
    let params = PatchParams::default();
    api.patch(name, &params, &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Polls `check` until it returns `Ok`; fails with `what` and its last complaint after [`WAIT`].
pub async fn wait_until(what: &str, check: impl AsyncFnMut() -> Result<(), String>) {
    kubeplex_testenv::eventually(what, WAIT, check).await;
}

/// The children in `cluster`'s namespace `apps`.
pub async fn children(env: &TestEnv, cluster: &str) -> Api<ConfigMap> {
    Api::namespaced(env.client(cluster).await.unwrap(), APPS)
}

/// Whether the child `name` is in `cluster` now.
pub async fn has_child(env: &TestEnv, cluster: &str, name: &str) -> bool {
    let found = children(env, cluster).await.get_opt(name).await;
    found.unwrap().is_some()
}

/// Polls until the child `name` in `cluster` exists (`true`) or not.
pub async fn wait_child(env: &TestEnv, cluster: &str, name: &str, exists: bool) {
    let api = children(env, cluster).await;
    let what = format!("{cluster}: child {name} present: {exists}");
    wait_until(&what, async || match api.get_opt(name).await {
        Ok(found) if found.is_some() == exists => Ok(()),
        Ok(found) => Err(format!("present: {}", found.is_some())),
        Err(error) => Err(error.to_string()),
    })
    .await;
}

/// Polls until the child `name` in `cluster` holds `value`.
pub async fn wait_child_value(env: &TestEnv, cluster: &str, name: &str, value: &str) {
    let api = children(env, cluster).await;
    let what = format!("{cluster}: child {name} with value {value}");
    wait_until(&what, async || {
        let found = api.get_opt(name).await.map_err(|e| e.to_string())?;
        let now = found
            .and_then(|c| c.data)
            .and_then(|d| d.get("value").cloned());
        match now.as_deref() == Some(value) {
            true => Ok(()),
            false => Err(format!("value is {now:?}")),
        }
    })
    .await;
}
