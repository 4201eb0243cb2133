//! A controller and its engine for unit tests: ConfigMap parents in `control`, ConfigMap children in
//! `cluster-a`, every client answered by a stand-in server.

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::ObjectMeta;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};

use crate::client::ClientPool;
use crate::core::{PARENT_UID_LABEL, ParentRef};
use crate::engine::Engine;
use crate::engine::EventPublisher;
use crate::engine::is_child_of;
use crate::health::Health;
use crate::runtime::Runtime;
use crate::watch::ChildCache;
use crate::watch::WatchRegistry;
use crate::{Action, Child, ContextName, Controller, Cx, Plan, Reconcile};

pub(crate) const CONTROL: ContextName = ContextName::new("control");
/// [`CONTROL`] as the place of a request.
pub(crate) const CONTROL_PLACE: crate::Target<ContextName> = crate::Target::Context(CONTROL);
pub(crate) const CLUSTER_A: ContextName = ContextName::new("cluster-a");

/// Reconciles nothing; its plan owns ConfigMaps in `cluster-a`.
pub(crate) struct TestController;

impl Controller for TestController {
    type Resource = ConfigMap;
    type Context = ContextName;

    fn plan() -> Plan<ContextName> {
        Plan::new("test-controller")
            .contexts([CONTROL])
            .namespaces(["crds", "other"])
            .owns(
                Child::of::<ConfigMap>()
                    .contexts([CLUSTER_A])
                    .namespaces(["ns"]),
            )
    }
}

impl Reconcile for TestController {
    type Error = crate::Error;

    async fn reconcile(&self, _: Arc<ConfigMap>, _: &Cx<ContextName>) -> crate::Result<Action> {
        Ok(Action::await_change())
    }
}

/// An engine of [`TestController`] whose every context is reached through `client`.
pub(crate) fn engine(client: Client) -> Engine<TestController> {
    engine_with(client.clone(), client)
}

/// An engine of [`TestController`] that reaches `control` and `cluster-a` through clients of their own.
pub(crate) fn engine_with(control: Client, cluster_a: Client) -> Engine<TestController> {
    let health = Arc::new(Health::default());
    let runtime = Arc::new(Runtime {
        pool: ClientPool::from_clients([("control", control), ("cluster-a", cluster_a)]),
        watches: WatchRegistry::new(health.clone(), Default::default()),
        health,
        metrics: Default::default(),
        role: tokio::sync::watch::channel(crate::client::Role::sole()).1,
        shards: None,
        members: Default::default(),
    });
    let plan = TestController::plan();
    Engine {
        reconciler: TestController,
        finalizer: plan.managed_finalizer().map(|f| f.into_owned()),
        parent_kind: "ConfigMap/v1".into(),
        events: EventPublisher::new(plan.name()),
        plan: Arc::new(plan),
        runtime,
        primaries: Default::default(),
        children: Vec::new(),
        member_children: Default::default(),
        failures: Mutex::default(),
        no_status: Default::default(),
        written_status: Default::default(),
        finalized: Default::default(),
    }
}

/// A parent in `control`, namespace `crds`, with these finalizers.
pub(crate) fn parent(finalizers: &[&str]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some("parent".into()),
            namespace: Some("crds".into()),
            uid: Some("uid-parent".into()),
            resource_version: Some("1".into()),
            finalizers: Some(finalizers.iter().map(|f| (*f).to_owned()).collect()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

/// A child cache holding fixed children.
pub(crate) struct FixedCache(pub(crate) Vec<ObjectMeta>);

impl ChildCache for FixedCache {
    fn parents(&self) -> BoxStream<'static, ParentRef> {
        futures::stream::empty().boxed()
    }
    fn children_of(&self, parent_uid: &str) -> Vec<ObjectMeta> {
        self.0
            .iter()
            .filter(|m| is_child_of(m, parent_uid))
            .cloned()
            .collect()
    }
    fn get(&self, namespace: Option<&str>, name: &str) -> Option<ObjectMeta> {
        let found = self
            .0
            .iter()
            .find(|m| m.namespace.as_deref() == namespace && m.name.as_deref() == Some(name));
        found.cloned()
    }
    fn parent_uids(&self) -> Vec<String> {
        let mut uids: Vec<String> = Vec::new();
        for uid in self
            .0
            .iter()
            .filter_map(|m| m.labels.as_ref()?.get(PARENT_UID_LABEL))
        {
            if !uids.contains(uid) {
                uids.push(uid.clone());
            }
        }
        uids
    }
    fn ready(&self) -> BoxFuture<'static, ()> {
        async {}.boxed()
    }
}
