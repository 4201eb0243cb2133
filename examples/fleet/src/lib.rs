//! The original kubeplex scenario, as an operator.
//!
//! An `AppDeployment` in namespace `crds` of the **control** cluster asks for an application; the operator
//! runs it as one Deployment in `namespace-a` and `namespace-b` of **cluster-a** and **cluster-b** (a full
//! replica in each), watches those Deployments (a child edited or deleted by hand is repaired), removes
//! them in every cluster when the `AppDeployment` is deleted, and reports per cluster in its status. More
//! child clusters can join and leave while it runs, each from a kubeconfig Secret (docs/fleets.md). With
//! `spec.rollout`, a changed image goes to one cluster at a time, each once the previous runs it
//! healthily ([`rollout`]).
//!
//! ```text
//! Control cluster (ns "crds": CRD-A, CRD-B) --operator--> Cluster A (ns A, ns B: Deployments)
//!                                                   \---> Cluster B (ns A, ns B: Deployments)
//! ```
#![deny(missing_docs)]

mod app;
mod deployer;

pub mod admission;
pub mod conversion;
pub mod demo;
pub mod figures;
pub mod rollout;

pub use app::v2;
pub use app::{
    AppDeployment, AppDeploymentSpec, AppDeploymentStatus, Rollout, RolloutPhase, RolloutStatus,
    RolloutStrategy,
};
pub use deployer::{AppDeployer, DeployError, deployment_for, deployment_running};

kubeplex::contexts! {
    /// The clusters of the scenario; each name is a kubeconfig context (remappable at run time with
    /// `KUBEPLEX_CONTEXT_<NAME>`).
    pub enum Fleet {
        Control = "control",
        ClusterA = "cluster-a",
        ClusterB = "cluster-b",
    }
}

/// Where `AppDeployment`s live in the control cluster.
pub const CRD_NAMESPACE: &str = "crds";
/// The namespaces of the child clusters that receive Deployments.
pub const CHILD_NAMESPACES: [&str; 2] = ["namespace-a", "namespace-b"];
/// Where the kubeconfig Secrets of the fleet's members live in the control cluster unless `fleet run
/// --members-namespace` says otherwise: the operator's own namespace in `deploy/`.
pub const MEMBERS_NAMESPACE: &str = "kubeplex-system";
/// The label selector of the member Secrets in the demo and in `deploy/` (`fleet run --members-from-secrets`).
pub const MEMBER_SELECTOR: &str = "kubeplex.io/fleet=kubeplex-fleet";
