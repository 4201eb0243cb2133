//! One environment for all the tests of a test binary.

use tokio::sync::OnceCell;

use crate::builder::TestEnvBuilder;
use crate::env::TestEnv;
use crate::error::{Error, Result};

/// A [`TestEnv`] started by the first test that asks for it and shared by every test of the binary.
///
/// Starting clusters costs seconds; tests that only read and write should share one environment, each
/// in namespaces of its own ([`TestEnv::create_namespace`]). Tests that stop or freeze a cluster should
/// start a private [`TestEnv`] instead. The processes end when the test binary exits.
///
/// ```no_run
/// use kubeplex_testenv::{SharedTestEnv, TestEnv};
///
/// static CLUSTERS: SharedTestEnv = SharedTestEnv::new(|| TestEnv::builder().clusters(["control", "cluster-a"]));
///
/// #[tokio::test]
/// async fn writes_a_config_map() {
///     let env = CLUSTERS.get().await.unwrap();
///     let namespace = env.create_namespace(&["cluster-a"], "writes").await.unwrap();
///     let client = env.client("cluster-a").await.unwrap();
///     // ...
/// }
/// ```
pub struct SharedTestEnv {
    builder: fn() -> TestEnvBuilder,
    env: OnceCell<std::result::Result<TestEnv, String>>,
}

impl SharedTestEnv {
    /// An environment that `builder` configures, started on first use.
    pub const fn new(builder: fn() -> TestEnvBuilder) -> Self {
        Self {
            builder,
            env: OnceCell::const_new(),
        }
    }

    /// The environment, started by the first caller; a failed start is reported to every caller, once.
    pub async fn get(&'static self) -> Result<&'static TestEnv> {
        crate::deadline::arm_test_deadline();
        let started = self
            .env
            .get_or_init(|| async { (self.builder)().start().await.map_err(|e| e.to_string()) });
        match started.await {
            Ok(env) => Ok(env),
            Err(message) => Err(Error::SharedStartFailed(message.clone())),
        }
    }
}
