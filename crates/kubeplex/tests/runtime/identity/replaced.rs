//! A context whose API server is replaced by another cluster at the same address (same certificates and
//! credentials, an empty store): nothing is written to it any more, and `/readyz` and the parent's status
//! say why.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::CustomResourceExt;
use kube::api::Api;
use kubeplex::{
    Action, Child, ClusterState, ContextName, Controller, Cx, Manager, Plan, Reconcile,
};
use kubeplex_testenv::{TestEnv, eventually};

use crate::children::parent::{
    CLUSTER_A, CONTROL, Parent, ParentError, ParentSpec, reconcile_parent,
};
use crate::children::wait::{create_parent, wait_parent};
use crate::support::audit;
use crate::support::{create_namespace, polling, stop, wait_exists, wait_started};

/// Parents in namespace `replaced` of control, each with the ConfigMaps its spec names in cluster-a.
struct Replaced;

impl Controller for Replaced {
    type Resource = Parent;
    type Context = ContextName;
    fn plan() -> Plan<ContextName> {
        Plan::new("replaced")
            .with_contexts([CONTROL])
            .with_namespaces(["replaced"])
            .owns(
                Child::of::<ConfigMap>()
                    .with_contexts([CLUSTER_A])
                    .with_namespaces(["kids"]),
            )
    }
}

impl Reconcile for Replaced {
    type Error = ParentError;
    async fn reconcile(
        &self,
        parent: Arc<Parent>,
        cx: &Cx<ContextName>,
    ) -> Result<Action, ParentError> {
        reconcile_parent(parent, cx).await
    }
}

#[tokio::test]
async fn a_context_whose_server_is_replaced_by_another_cluster_is_written_to_no_more() {
    // Its own clusters: one of them is replaced.
    let env = TestEnv::builder()
        .clusters(["control", "cluster-a"])
        .crd("control", Parent::crd())
        .audit_log(true)
        .start()
        .await
        .unwrap();
    let control = env.client("control").await.unwrap();
    create_namespace(&env.client("cluster-a").await.unwrap(), "kids").await;
    let running = Manager::with_kubeconfig(env.kubeconfig().clone())
        .ping_interval(Duration::from_millis(500))
        .controller(Replaced)
        .start()
        .await
        .unwrap();
    wait_started(&running, "started").await;
    let spec = ParentSpec {
        children: vec!["before".into()],
        ..ParentSpec::default()
    };
    create_parent(&control, "replaced", "moved", spec).await;
    let kids = |client| Api::<ConfigMap>::namespaced(client, "kids");
    wait_exists(&kids(env.client("cluster-a").await.unwrap()), "before").await;
    let was = running.readiness().clusters["cluster-a"].identity.clone();
    assert!(was.is_some());

    // Another cluster at cluster-a's address, with the namespace the children go to: the child declared
    // there would be created again, were it written to.
    env.replace("cluster-a").await.unwrap();
    let new_a = env.client("cluster-a").await.unwrap();
    create_namespace(&new_a, "kids").await;
    const ANOTHER: &str = "now reaches another cluster";
    let report = eventually("cluster-a refused in /readyz", polling(), async || {
        let report = running.readiness();
        let reasons = &report.clusters["cluster-a"].reasons;
        match reasons.iter().any(|r| r.contains(ANOTHER)) {
            true => Ok(report),
            false => Err(format!("{report:#?}")),
        }
    })
    .await;
    let now = report.clusters["cluster-a"].identity.clone();
    assert!(now.is_some() && now != was, "{report:#?}");
    wait_parent(
        &control,
        "replaced",
        "moved",
        "cluster-a refused in the status",
        |p| {
            let clusters = p.status.as_ref().map(|s| &s.fleet.clusters);
            let entry = clusters.and_then(|c| c.get("cluster-a"));
            entry.is_some_and(|c| {
                c.state == ClusterState::Failed
                    && c.message.as_deref().unwrap_or("").contains(ANOTHER)
            })
        },
    )
    .await;
    let written = kids(new_a).get_opt("before").await.unwrap();
    assert!(
        written.is_none(),
        "a child written to the other cluster: {written:#?}"
    );
    stop(running).await;
    // Control answered throughout, pinged every 500 ms: it was asked which cluster it is once.
    let asked = audit::requests(&env, "control").into_iter().filter(|r| {
        r.uri.starts_with("/api/v1/namespaces/kube-system") && r.agent.starts_with("kubeplex/")
    });
    assert_eq!(
        asked.count(),
        1,
        "{}",
        audit::lines(&audit::requests(&env, "control"))
    );
}
