//! What the example's real-cluster tests share: how long they wait, the clusters, the operator in this
//! process, and polling until a condition holds.
//!
//! The tests that run the operator share one set of the demo's three clusters ([`stage`]: audit logs on,
//! the `AppDeployment` CRD installed), each in namespaces of its own: its parents' in control, two for the
//! children in cluster-a and cluster-b, which its operator is given in place of `crds`, `namespace-a` and
//! `namespace-b`. A test that takes cluster-b away from its operator does it through a [`Relay`] of
//! its own, never to the shared servers. The tests that stop or freeze a real server start the demo's
//! clusters for themselves ([`clusters`]); the binary's docs (`main.rs`) list every test with clusters of
//! its own.
#![allow(dead_code)] // Each test binary uses a different part.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::Client;
use kube::api::Api;
use kube::config::Kubeconfig;
use kubeplex::{Context as _, Controller, Manager, Plan, Reconcile, Running};
use kubeplex_fleet::demo::apply_instance;
use kubeplex_fleet::{AppDeployer, AppDeployment, Fleet};
use kubeplex_testenv::{Relay, SharedTestEnv, TestEnv};

pub mod helm;
pub mod rollout;

/// How long a test waits for anything the clusters or the operator do.
pub const WAIT: Duration = Duration::from_secs(60);

const FLEET: [Fleet; 3] = [Fleet::Control, Fleet::ClusterA, Fleet::ClusterB];
const CHILD_CLUSTERS: [&str; 2] = ["cluster-a", "cluster-b"];

/// The demo's three clusters, each writing an audit log (who sent which request), shared by the tests.
static CLUSTERS: SharedTestEnv = SharedTestEnv::new(|| {
    TestEnv::builder()
        .clusters(FLEET.map(|c| c.name()))
        .crd(Fleet::Control.name(), kubeplex_fleet::admission::crd(None))
        .audit_log(true)
});

/// Held by a test while it writes the cluster-wide objects the chart's dry run writes too: the CRD (put
/// back as [`CLUSTERS`] installs it) and the webhook configurations, so that no two tests meet there.
pub static CLUSTER_WIDE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// One test's part of the shared clusters: its namespaces, and the kubeconfig its operators use.
pub struct Stage {
    pub env: &'static TestEnv,
    /// The parents' namespace in control (the demo's `crds`).
    pub parents: String,
    /// The children's namespaces in cluster-a and cluster-b (the demo's `namespace-a` and `namespace-b`).
    pub children: [String; 2],
    kubeconfig: Kubeconfig,
}

/// The shared clusters, started by the first test that asks, for a test that needs no namespaces of its
/// own (its objects are cluster-wide, dry runs, or in namespaces of fixed names no other test uses).
pub async fn shared() -> &'static TestEnv {
    CLUSTERS.get().await.unwrap()
}

/// The shared clusters (started by the first test that asks) and new namespaces named after `prefix`.
pub async fn stage(prefix: &str) -> Stage {
    let env = CLUSTERS.get().await.unwrap();
    let parents = env
        .create_namespace(&[Fleet::Control.name()], prefix)
        .await
        .unwrap();
    let mut children = Vec::new();
    for side in ["a", "b"] {
        let name = format!("{prefix}-{side}");
        children.push(env.create_namespace(&CHILD_CLUSTERS, &name).await.unwrap());
    }
    Stage {
        env,
        parents,
        children: children.try_into().unwrap(),
        kubeconfig: env.kubeconfig().clone(),
    }
}

impl Stage {
    pub async fn control(&self) -> Client {
        self.env.client(Fleet::Control.name()).await.unwrap()
    }

    /// The parents.
    pub async fn apps(&self) -> Api<AppDeployment> {
        Api::namespaced(self.control().await, &self.parents)
    }

    /// Creates or changes the parent `name` (`demo::apply_instance`).
    pub async fn apply(&self, name: &str, image: &str, replicas: i32) {
        let control = self.control().await;
        apply_instance(&control, &self.parents, name, image, replicas)
            .await
            .unwrap();
    }

    /// `plan` in this test's namespaces.
    pub fn plan(&self, plan: Plan<Fleet>) -> Plan<Fleet> {
        plan.with_namespaces([self.parents.clone()])
            .child_namespaces::<Deployment>(self.children.clone())
    }

    /// `fleet run`'s flags for this test's namespaces.
    pub fn run_flags(&self) -> [String; 4] {
        [
            "--namespace".into(),
            self.parents.clone(),
            "--child-namespaces".into(),
            self.children.join(","),
        ]
    }

    /// A manager with `reconciler` in this test's namespaces.
    pub fn manager_with<R: Reconcile + Controller<Context = Fleet>>(
        &self,
        reconciler: R,
    ) -> Manager {
        Manager::with_kubeconfig(self.kubeconfig.clone())
            .controller_with(reconciler, |p| self.plan(p))
    }

    /// A manager with the example's controller in this test's namespaces.
    pub fn manager(&self) -> Manager {
        self.manager_with(AppDeployer::default())
    }

    /// The example's operator in this process, started (every context ready); pings every `ping` when given.
    pub async fn operator(&self, ping: Option<Duration>) -> Running {
        let mut manager = self.manager();
        if let Some(interval) = ping {
            manager = manager.ping_interval(interval);
        }
        started(manager).await
    }

    /// A relay in front of `cluster`, through which this test's operators reach it from now on: the test
    /// takes the cluster away from them alone.
    pub async fn relay(&mut self, cluster: Fleet) -> Relay {
        let relay = self.env.relay(cluster.name()).await.unwrap();
        relay.route(&mut self.kubeconfig).unwrap();
        relay
    }
}

/// Starts `manager` and waits (within [`WAIT`]) until it has started.
pub async fn started(manager: Manager) -> Running {
    let running = manager.start().await.unwrap();
    tokio::time::timeout(WAIT, running.wait_started())
        .await
        .expect("started in time")
        .unwrap();
    running
}

/// Polls `check` until it returns `Ok`; panics with its last complaint after [`WAIT`].
pub async fn eventually<T>(what: &str, check: impl AsyncFnMut() -> Result<T, String>) -> T {
    kubeplex_testenv::eventually(what, WAIT, check).await
}

/// How long `Running::shutdown` may take before the test fails: the reconciles in flight are bounded by
/// their own deadlines, so a longer shutdown is a hang.
pub const SHUTDOWN_LIMIT: Duration = Duration::from_secs(60);

/// Shuts `running` down; fails the test if that takes longer than [`SHUTDOWN_LIMIT`].
pub async fn stop(running: Running) {
    tokio::time::timeout(SHUTDOWN_LIMIT, running.shutdown())
        .await
        .unwrap_or_else(|_| panic!("the operator did not shut down within {SHUTDOWN_LIMIT:?}"));
}
