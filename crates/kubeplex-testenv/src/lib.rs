//! Several real Kubernetes API servers on one machine, for testing code that talks to many clusters.
//!
//! Each cluster is an upstream `kube-apiserver` with its own `etcd`, certificates and data, on free
//! loopback ports; the kubeconfig has one context per cluster, named as the cluster. The programs are built
//! from the Go modules pinned in `assets/go.mod` into a cache on first use (or taken from
//! `KUBEBUILDER_ASSETS`). By default no controller manager runs: there is no garbage collection,
//! namespaces stay `Terminating` after a delete, and Deployments get no ReplicaSets. A cluster named with
//! [`TestEnvBuilder::controller_manager`] also runs an upstream `kube-controller-manager` with the
//! [`CONTROLLER_MANAGER_CONTROLLERS`]; with no kubelet or scheduler anywhere, Pods stay `Pending`.
//!
//! The `kubeplex-testenv` command line (`up`, `build`) is built only with the feature `cli`.
//!
//! ```no_run
//! # async fn demo() -> kubeplex_testenv::Result<()> {
//! use kubeplex_testenv::TestEnv;
//!
//! let env = TestEnv::builder().clusters(["control", "cluster-a", "cluster-b"]).start().await?;
//! let client = env.client("cluster-a").await?;
//! env.stop("cluster-b")?; // connection refused from now on
//! env.start("cluster-b").await?; // back, with its data
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

// The public API lives at the top; `control_plane` is the process plumbing under it.
mod attach;
mod audit;
mod builder;
mod control_plane;
mod deadline;
mod env;
mod error;
mod http;
mod kubeconfig;
mod members;
mod polling;
mod process_group;
mod ready;
mod relay;
mod shared;
mod tokens;
mod watched;

pub use attach::ATTACH_VAR;
pub use builder::TestEnvBuilder;
pub use control_plane::{
    Binaries, CACHE_DIR_VAR, CONTROLLER_MANAGER_CONTROLLERS, ClusterInventory, HELM_VAR, Helm,
    KUBEBUILDER_ASSETS, LEDGER_VAR, NO_PERMISSIONS_USER,
};
pub use deadline::{DEFAULT_TEST_DEADLINE, TEST_DEADLINE_VAR, arm_test_deadline};
pub use env::{DEFAULT_START_TIMEOUT, TestEnv};
pub use error::{Error, Result};
pub use http::{HTTP_LIMIT, HttpResponse, http_get};
pub use kubeconfig::{Credential, set_user};
pub use members::MEMBER_KUBECONFIG_KEY;
pub use polling::{
    DEFAULT_POLL_INTERVAL, LEAST_TIME_FOR_A_CHECK, Observation, Polling, eventually, try_eventually,
};
pub use relay::Relay;
pub use shared::SharedTestEnv;
pub use watched::{Watched, output_within};
