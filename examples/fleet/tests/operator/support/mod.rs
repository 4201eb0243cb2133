//! What the example's real-cluster tests share: how long they wait, the clusters, the operator in this
//! process, and polling until a condition holds.
#![allow(dead_code)] // Each test binary uses a different part.

use kube::CustomResourceExt as _;
use std::time::Duration;

use kubeplex::{Manager, Running};
use kubeplex_fleet::{AppDeployer, AppDeployment};
use kubeplex_testenv::TestEnv;

pub mod helm;
pub mod rollout;

/// How long a test waits for anything the clusters or the operator do.
pub const WAIT: Duration = Duration::from_secs(60);

/// The demo's three clusters, its CRD and namespaces.
pub async fn clusters() -> TestEnv {
    kubeplex_fleet::demo::clusters().await.unwrap()
}

/// The same clusters, each writing an audit log (who sent which request), in a set of their own.
pub async fn audited_clusters() -> TestEnv {
    let env = TestEnv::builder()
        .clusters(["control", "cluster-a", "cluster-b"])
        .crd("control", AppDeployment::crd())
        .audit_log(true)
        .start()
        .await
        .unwrap();
    kubeplex_fleet::demo::create_namespaces(&env).await.unwrap();
    env
}

/// The example's operator in this process, started (every context ready); pings every `ping` when given.
pub async fn operator(env: &TestEnv, ping: Option<Duration>) -> Running {
    let mut manager = Manager::with_kubeconfig(env.kubeconfig().clone()).controller(AppDeployer);
    if let Some(interval) = ping {
        manager = manager.ping_interval(interval);
    }
    started(manager).await
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
