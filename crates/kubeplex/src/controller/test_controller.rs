//! A controller for unit tests: ConfigMap parents in `control`, ConfigMap children in `cluster-a`, and a
//! runtime whose clients are given (stand-in servers, `client::fake_api`).

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;

use crate::controller::{Controller, Cx, Reconcile};
use crate::core::{Action, ContextName};
use crate::plan::{Child, Plan};
use crate::runtime::Runtime;

pub(crate) const CONTROL: ContextName = ContextName::new("control");
/// [`CONTROL`] as the cluster a reconcile is keyed by.
pub(crate) const CONTROL_CLUSTER: crate::core::Cluster<ContextName> =
    crate::core::Cluster::Context(CONTROL);
pub(crate) const CLUSTER_A: ContextName = ContextName::new("cluster-a");

/// Reconciles nothing; its plan owns ConfigMaps in `cluster-a`.
pub(crate) struct TestController;

impl Controller for TestController {
    type Resource = ConfigMap;
    type Context = ContextName;

    fn plan() -> Plan<ContextName> {
        Plan::new("test-controller")
            .with_contexts([CONTROL])
            .with_namespaces(["crds", "other"])
            .owns(
                Child::of::<ConfigMap>()
                    .with_contexts([CLUSTER_A])
                    .with_namespaces(["ns"]),
            )
    }
}

impl Reconcile for TestController {
    type Error = crate::core::Error;

    async fn reconcile(
        &self,
        _: Arc<ConfigMap>,
        _: &Cx<ContextName>,
    ) -> crate::core::Result<Action> {
        Ok(Action::await_change())
    }
}

/// A runtime that reaches `control` and `cluster-a` through clients of their own.
pub(crate) fn runtime(control: Client, cluster_a: Client) -> Arc<Runtime> {
    runtime_of([("control", control), ("cluster-a", cluster_a)])
}

/// A runtime that reaches each of these contexts through its client.
pub(crate) fn runtime_of(
    clients: impl IntoIterator<Item = (&'static str, Client)>,
) -> Arc<Runtime> {
    Runtime::of_clients(clients)
}

/// A cx of [`TestController`] in `context`, after `failures` failed reconciles, whose clients reach a stand-in
/// server that answers every request with an empty object.
pub(crate) fn cx(context: ContextName, failures: u32) -> Cx<ContextName> {
    let (client, _) = crate::testing::fake_api::client(|_, _, _| (200, serde_json::json!({})));
    Cx::new(
        crate::core::Cluster::Context(context),
        Arc::new(TestController::plan()),
        runtime(client.clone(), client),
        failures,
    )
}
