//! One real API server for the unit tests that need a server's own answers, shared by all of them in the
//! library's test binary; each test works in namespaces of its own.

use kubeplex_testenv::{SharedTestEnv, TestEnv};

/// The cluster's name, also its kubeconfig context.
pub(crate) const CLUSTER: &str = "cluster-a";

static ENV: SharedTestEnv = SharedTestEnv::new(|| TestEnv::builder().clusters([CLUSTER]));

/// The shared environment, started by the first test that asks.
pub(crate) async fn env() -> &'static TestEnv {
    ENV.get().await.unwrap()
}
