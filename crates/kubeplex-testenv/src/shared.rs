//! One environment for all the tests of a test binary, or for several binaries through an attach file.

use tokio::sync::OnceCell;

use crate::attach::attach_file_from_env;
use crate::builder::TestEnvBuilder;
use crate::env::TestEnv;
use crate::error::{Error, Result};

/// A [`TestEnv`] started by the first test that asks for it and shared by every test of the binary.
///
/// Starting clusters costs seconds; tests that only read and write should share one environment, each
/// in namespaces of its own ([`TestEnv::create_namespace`]). Tests that stop or freeze a cluster should
/// start a private [`TestEnv`] instead. The processes end when the test binary exits.
///
/// When [`ATTACH_VAR`](crate::ATTACH_VAR) names an attach file (`kubeplex-testenv up --attach-file PATH`),
/// an environment made with [`SharedTestEnv::new`] attaches to the clusters it describes
/// ([`TestEnvBuilder::attach`]) instead of starting its own, if they have everything the builder asks for
/// (else it starts its own, and says why at `info`): binaries that run one after another then share one set.
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
    attach: bool,
    env: OnceCell<std::result::Result<TestEnv, String>>,
}

impl SharedTestEnv {
    /// An environment that `builder` configures, started on first use, or attached to (see above).
    pub const fn new(builder: fn() -> TestEnvBuilder) -> Self {
        Self {
            builder,
            attach: true,
            env: OnceCell::const_new(),
        }
    }

    /// An environment that `builder` configures, always started by this binary: for tests whose
    /// cluster-wide objects (fixed-name namespaces, roles, webhook configurations) would meet those of
    /// other tests on clusters attached to.
    pub const fn private(builder: fn() -> TestEnvBuilder) -> Self {
        Self {
            builder,
            attach: false,
            env: OnceCell::const_new(),
        }
    }

    /// The environment, started (or attached to) by the first caller; a failed start is reported to every
    /// caller, once.
    pub async fn get(&'static self) -> Result<&'static TestEnv> {
        crate::deadline::arm_test_deadline();
        let started = self
            .env
            .get_or_init(|| async { self.start().await.map_err(|e| e.to_string()) });
        match started.await {
            Ok(env) => Ok(env),
            Err(message) => Err(Error::SharedStartFailed(message.clone())),
        }
    }

    async fn start(&self) -> Result<TestEnv> {
        let builder = (self.builder)();
        let Some(path) = attach_file_from_env().filter(|_| self.attach) else {
            return builder.start().await;
        };
        match builder.clone().attach(&path).await {
            Err(Error::Attach { problem, .. }) => {
                tracing::info!(file = %path.display(), problem, "starting clusters of its own");
                builder.start().await
            }
            attached => attached,
        }
    }
}
