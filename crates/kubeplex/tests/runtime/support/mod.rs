//! What the runtime tests share: the clusters, the fleet, a recording reconciler, object helpers, and a
//! probe client.
#![allow(dead_code)] // Each test binary uses a different part.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::core::object::HasStatus;
use kube::{Client, Resource};
use kubeplex_testenv::{HttpResponse, Polling, SharedTestEnv, TestEnv, eventually};
use parking_lot::Mutex;

pub mod audit;
pub mod certificates;
pub mod logs;
pub mod tls_proxy;

kubeplex::contexts! {
    /// The test clusters.
    pub enum Fleet {
        Control = "control",
        ClusterA = "cluster-a",
        ClusterB = "cluster-b",
    }
}

/// The clusters the tests of a binary share, each writing an audit log. Tests keep apart by namespaces and
/// names of their own; a test that stops, freezes or reconfigures a cluster starts an environment of its own.
static CLUSTERS: SharedTestEnv = SharedTestEnv::new(|| {
    TestEnv::builder()
        .clusters(["control", "cluster-a", "cluster-b", "cluster-c"])
        .audit_log(true)
});

/// The shared clusters, with each of `crds` installed in the cluster named beside it (a kind installed
/// already is left as it is, so every test may ask for its own).
pub async fn clusters<const N: usize>(
    crds: [(&str, CustomResourceDefinition); N],
) -> &'static TestEnv {
    let env = CLUSTERS.get().await.unwrap();
    for (cluster, crd) in crds {
        env.install_crd(cluster, crd).await.unwrap();
    }
    env
}

/// How long a test waits for anything the clusters do.
pub const WAIT: Duration = Duration::from_secs(60);

/// Within [`WAIT`], every 200 ms: how a test polls the clusters.
pub fn polling() -> Polling {
    Polling::within(WAIT).every(Duration::from_millis(200))
}

/// Polls the object `name` until `done` holds; fails the test with its last status after [`WAIT`].
pub async fn wait_status<K>(api: &Api<K>, name: &str, what: &str, done: impl Fn(&K) -> bool) -> K
where
    K: Resource + HasStatus + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K::Status: std::fmt::Debug,
{
    eventually(what, polling(), async || {
        let object = api.get(name).await.unwrap();
        if done(&object) {
            Ok(object)
        } else {
            Err(format!("{:#?}", object.status()))
        }
    })
    .await
}

/// Polls until the object `name` exists and is not being deleted; fails the test after [`WAIT`].
pub async fn wait_exists<K>(api: &Api<K>, name: &str) -> K
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(format!("{name} appearing"), polling(), async || {
        let object = api.get_opt(name).await.unwrap();
        object.filter(|object| object.meta().deletion_timestamp.is_none())
    })
    .await
}

/// Waits until `running` has started (every required context ready); fails the test with `what` after [`WAIT`].
pub async fn wait_started(running: &kubeplex::Running, what: &str) {
    tokio::time::timeout(WAIT, running.wait_started())
        .await
        .expect(what)
        .unwrap();
}

/// One reconcile as a test observes it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Seen {
    pub context: Fleet,
    pub namespace: String,
    pub name: String,
    /// The ConfigMap's `data.value` at reconcile time.
    pub value: Option<String>,
}

/// Records every reconcile; cloned into each reconciler.
#[derive(Clone, Default)]
pub struct Recorder(Arc<Mutex<Vec<Seen>>>);

impl Recorder {
    /// Records a reconcile of `object` from `context` (these tests watch typed contexts only).
    pub fn record(&self, context: kubeplex::Cluster<Fleet>, object: &ConfigMap) {
        let seen = Seen {
            context: context.as_context().expect("a typed context"),
            namespace: object.metadata.namespace.clone().unwrap_or_default(),
            name: object.metadata.name.clone().unwrap_or_default(),
            value: object.data.as_ref().and_then(|d| d.get("value").cloned()),
        };
        self.0.lock().push(seen);
    }

    pub fn all(&self) -> Vec<Seen> {
        self.0.lock().clone()
    }

    /// Waits until `done` holds for the reconciles seen so far; panics with what was seen after `timeout`.
    pub async fn wait_for(&self, what: &str, timeout: Duration, done: impl Fn(&[Seen]) -> bool) {
        let polling = Polling::within(timeout).every(Duration::from_millis(50));
        eventually(what, polling, async || {
            let seen = self.all();
            if done(&seen) {
                Ok(())
            } else {
                Err(format!("seen: {seen:#?}"))
            }
        })
        .await;
    }

    /// The distinct (context, namespace, name) triples seen.
    pub fn places(&self) -> BTreeSet<(Fleet, String, String)> {
        self.all()
            .into_iter()
            .map(|s| (s.context, s.namespace, s.name))
            .collect()
    }
}

pub async fn create_namespace(client: &Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&PostParams::default(), &namespace).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => panic!("creating namespace {name}: {error}"),
    }
}

/// Creates or updates the ConfigMap `namespace/name` with `data.value = value`.
pub async fn put_config_map(client: &Client, namespace: &str, name: &str, value: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let object = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": name },
        "data": { "value": value },
    });
    api.patch(
        name,
        &PatchParams::apply("kubeplex-tests"),
        &Patch::Apply(&object),
    )
    .await
    .unwrap();
}

/// How long `Running::shutdown` may take before the test fails: the reconciles in flight are bounded by
/// their own deadlines, so a longer shutdown is a hang.
pub const SHUTDOWN_LIMIT: Duration = Duration::from_secs(60);

/// GETs `path` on the probe port; panics when no whole response came within testenv's `HTTP_LIMIT`.
pub async fn http_get(address: SocketAddr, path: &str) -> HttpResponse {
    kubeplex_testenv::http_get(address, path)
        .await
        .unwrap_or_else(|error| panic!("on {address}: {error}"))
}

/// Shuts `running` down; fails the test if that takes longer than [`SHUTDOWN_LIMIT`].
pub async fn stop(running: kubeplex::Running) {
    tokio::time::timeout(SHUTDOWN_LIMIT, running.shutdown())
        .await
        .unwrap_or_else(|_| panic!("the operator did not shut down within {SHUTDOWN_LIMIT:?}"));
}

/// GETs a probe with `?verbose` (the whole report: the tests ask from loopback); returns the status code
/// and the parsed JSON body.
pub async fn probe(address: SocketAddr, path: &str) -> (u16, serde_json::Value) {
    let response = http_get(address, &format!("{path}?verbose")).await;
    let body = serde_json::from_str(&response.body).unwrap_or(serde_json::Value::Null);
    (response.code, body)
}

/// Polls a probe until it answers `status`; returns the body. Panics with the last answer after `timeout`.
pub async fn probe_until(
    address: SocketAddr,
    path: &str,
    status: u16,
    timeout: Duration,
) -> serde_json::Value {
    eventually(
        format!("{path} answering {status}"),
        timeout,
        async || match probe(address, path).await {
            (code, body) if code == status => Ok(body),
            (code, body) => Err(format!("{path} still answers {code}: {body:#}")),
        },
    )
    .await
}

/// The reasons a probe body gives for `context`, joined.
pub fn reasons(body: &serde_json::Value, context: &str) -> String {
    body["clusters"][context]["reasons"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str())
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .unwrap_or_default()
}

/// Polls `path` until `context`'s status in its body is `status`; returns the body. Panics with the last
/// answer after [`WAIT`]: one read of a probe is a snapshot, and a context becomes ready in steps.
pub async fn wait_context_status(
    address: SocketAddr,
    path: &str,
    context: &str,
    status: &str,
) -> serde_json::Value {
    let what = format!("{context} {status} in {path}");
    eventually(what, WAIT, async || {
        let body = probe(address, path).await.1;
        if body["clusters"][context]["status"] == status {
            Ok(body)
        } else {
            Err(format!("{body:#}"))
        }
    })
    .await
}
