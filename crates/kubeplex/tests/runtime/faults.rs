//! Clusters that are down or hang: the probes say which, the other contexts keep reconciling, and a returning
//! cluster is picked up without a restart. Each test reaches cluster-b through a relay of its own, which
//! takes the cluster from that test's operator alone: bytes held (a frozen server) or connections refused (a
//! stopped one), while the suite's other tests go on using it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use crate::support::{
    Fleet, Recorder, WAIT, create_namespace, probe, probe_until, put_config_map, reasons,
    wait_context_status, wait_started,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kubeplex::{Action, Controller, Cx, Manager, Plan, Reconcile};
use kubeplex_testenv::{Relay, TestEnv};

struct Watcher(Recorder);
impl Controller for Watcher {
    type Resource = ConfigMap;
    type Context = Fleet;
    fn plan() -> Plan<Fleet> {
        Plan::new("watcher")
            .with_contexts([Fleet::ClusterA, Fleet::ClusterB])
            .with_namespaces(["faults"])
    }
}
impl Reconcile for Watcher {
    type Error = Infallible;
    async fn reconcile(
        &self,
        object: Arc<ConfigMap>,
        cx: &Cx<Fleet>,
    ) -> Result<Action, Infallible> {
        self.0.record(cx.cluster(), &object);
        Ok(Action::await_change())
    }
}

/// How many reconciles of `name` in `context` `recorder` saw.
fn reconciles(recorder: &Recorder, context: Fleet, name: &str) -> usize {
    let all = recorder.all();
    all.iter()
        .filter(|s| s.context == context && s.name == name)
        .count()
}

/// One test's part of the suite's clusters: its namespace in cluster-a and cluster-b, and the relay its
/// operator reaches cluster-b through.
struct Faults {
    env: &'static TestEnv,
    namespace: &'static str,
    relay: Relay,
}

impl Faults {
    async fn new(namespace: &'static str) -> Self {
        let env = crate::support::clusters([]).await;
        for cluster in ["cluster-a", "cluster-b"] {
            create_namespace(&env.client(cluster).await.unwrap(), namespace).await;
        }
        let relay = env.relay("cluster-b").await.unwrap();
        Self {
            env,
            namespace,
            relay,
        }
    }

    /// The watcher's plan in this test's namespace.
    fn plan(&self, plan: Plan<Fleet>) -> Plan<Fleet> {
        plan.with_namespaces([self.namespace])
    }

    /// An operator watching this test's namespace, reaching cluster-b through the relay.
    fn manager(&self, recorder: &Recorder) -> Manager {
        let mut kubeconfig = self.env.kubeconfig().clone();
        self.relay.route(&mut kubeconfig).unwrap();
        Manager::with_kubeconfig(kubeconfig)
            .probes("127.0.0.1:0")
            .ping_interval(Duration::from_secs(1))
            .controller_with(Watcher(recorder.clone()), |p| self.plan(p))
    }
}

fn saw(recorder: &Recorder, context: Fleet, value: &str) -> bool {
    recorder
        .all()
        .iter()
        .any(|s| s.context == context && s.value.as_deref() == Some(value))
}

#[tokio::test]
async fn startupz_answers_503_until_a_hanging_context_has_synced() {
    let faults = Faults::new("faults-startupz").await;
    faults.relay.cut();
    let recorder = Recorder::default();
    let running = faults.manager(&recorder).start().await.unwrap();
    let address = running.probe_address().unwrap();

    let body = probe(address, "/startupz").await.1;
    assert_eq!(probe(address, "/startupz").await.0, 503, "{body:#}");
    assert_ne!(body["clusters"]["cluster-b"]["status"], "ready", "{body:#}");
    // The hanging cluster is named once its ping times out.
    let deadline = tokio::time::Instant::now() + WAIT;
    while !reasons(&probe(address, "/startupz").await.1, "cluster-b").contains("unreachable") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "cluster-b never reported unreachable"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_context_status(address, "/startupz", "cluster-a", "ready").await;

    faults.relay.open();
    wait_started(&running, "started after the thaw").await;
    probe_until(address, "/startupz", 200, WAIT).await;
    crate::support::stop(running).await;
}

#[tokio::test]
async fn with_one_cluster_stopped_the_others_reconcile_and_the_probe_names_it() {
    let faults = Faults::new("faults-stopped").await;
    faults.relay.refuse();
    let recorder = Recorder::default();
    let running = faults.manager(&recorder).start().await.unwrap();
    let address = running.probe_address().unwrap();

    put_config_map(
        &faults.env.client("cluster-a").await.unwrap(),
        faults.namespace,
        "while-b-is-down",
        "a-1",
    )
    .await;
    recorder
        .wait_for("a reconcile in cluster-a", WAIT, |_| {
            saw(&recorder, Fleet::ClusterA, "a-1")
        })
        .await;
    let body = probe_until(address, "/startupz", 503, WAIT).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut body = body;
    while !reasons(&body, "cluster-b").contains("cluster cluster-b: unreachable") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "cluster-b not named: {body:#}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        body = probe(address, "/startupz").await.1;
    }
    let body = wait_context_status(address, "/startupz", "cluster-a", "ready").await;
    assert!(
        reasons(&body, "cluster-b").contains("cluster cluster-b: unreachable"),
        "{body:#}"
    );

    faults.relay.open();
    wait_started(&running, "started once cluster-b is back").await;
    crate::support::stop(running).await;
}

#[tokio::test]
async fn readyz_follows_a_cluster_that_goes_away_and_comes_back() {
    let faults = Faults::new("faults-readyz").await;
    let (env, namespace) = (faults.env, faults.namespace);
    let (recorder, ignoring) = (Recorder::default(), Recorder::default());
    // The same watch, but a cluster's readiness flip does not reconcile its parents.
    let ignores_flips = |plan: Plan<Fleet>| {
        let (contexts, namespaces) = (plan.contexts().to_vec(), plan.namespaces().to_vec());
        (Plan::new("ignoring")
            .with_contexts(contexts)
            .with_namespaces(namespaces))
        .ignore_readiness_flips()
    };
    let running = (faults.manager(&recorder))
        .controller_with(Watcher(ignoring.clone()), |p| ignores_flips(faults.plan(p)))
        .start()
        .await
        .unwrap();
    let address = running.probe_address().unwrap();
    wait_started(&running, "started").await;
    let a = env.client("cluster-a").await.unwrap();
    put_config_map(&a, namespace, "steady", "a-1").await;
    let b = env.client("cluster-b").await.unwrap();
    put_config_map(&b, namespace, "survivor", "b-1").await;
    recorder
        .wait_for("the first version", WAIT, |_| {
            saw(&recorder, Fleet::ClusterB, "b-1")
        })
        .await;
    ignoring
        .wait_for("cluster-a's object, once", WAIT, |_| {
            reconciles(&ignoring, Fleet::ClusterA, "steady") == 1
        })
        .await;
    probe_until(address, "/readyz", 200, WAIT).await;

    faults.relay.refuse();
    probe_until(address, "/readyz", 503, WAIT).await;
    // Wait for the state, not for one read of it: the 503 may come before cluster-b's reason is phrased.
    let body = wait_context_status(address, "/readyz", "cluster-a", "ready").await;
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut body = body;
    while !reasons(&body, "cluster-b").contains("cluster cluster-b") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "cluster-b not named: {body:#}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        body = probe(address, "/readyz").await.1;
    }
    assert_eq!(
        probe(address, "/startupz").await.0,
        200,
        "started stays started"
    );

    // The change is written before the operator's watch has reconnected.
    faults.relay.open();
    put_config_map(
        &env.client("cluster-b").await.unwrap(),
        namespace,
        "survivor",
        "b-2",
    )
    .await;
    recorder
        .wait_for("the change made while disconnected", WAIT, |_| {
            saw(&recorder, Fleet::ClusterB, "b-2")
        })
        .await;
    probe_until(address, "/readyz", 200, WAIT).await;
    // cluster-b's flips (it went, it came back) reconciled cluster-a's object again for the controller that
    // follows them, and never for the one that ignores them.
    recorder
        .wait_for("cluster-a's object reconciled on the flips", WAIT, |_| {
            reconciles(&recorder, Fleet::ClusterA, "steady") >= 3
        })
        .await;
    assert_eq!(reconciles(&ignoring, Fleet::ClusterA, "steady"), 1);
    crate::support::stop(running).await;
}
