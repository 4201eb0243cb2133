//! kubeplex: Kubernetes operators that reconcile across many clusters from one process.
//!
//! A kubeplex operator declares its clusters (kubeconfig contexts) once, with [`contexts!`], and
//! describes each controller with the [`#[controller]`](macro@controller) attribute: which resource it
//! reconciles, in which contexts and namespaces it watches it, and which child kinds it creates where.
//! The compiler checks all of it: a misspelled context is an ordinary "no variant named …" error with
//! rustc's suggestion, and every key of the attribute is validated while compiling (namespaces,
//! durations, selectors, finalizer names, …), with an error at the offending token that says the fix.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use k8s_openapi::api::apps::v1::Deployment;
//! use kube::CustomResource;
//! use kubeplex::prelude::*;
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//!
//! // The fleet, declared once: each variant is a context, the string its kubeconfig context name.
//! kubeplex::contexts! {
//!     pub enum Fleet {
//!         Control = "control",
//!         ClusterA = "cluster-a",
//!         ClusterB = "cluster-b",
//!     }
//! }
//!
//! // The custom resource, as kube-rs users know it.
//! #[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
//! #[kube(group = "demo.kubeplex.dev", version = "v1", kind = "AppDeployment", namespaced)]
//! pub struct AppDeploymentSpec {
//!     pub image: String,
//!     pub replicas: i32,
//! }
//!
//! // Where the parent is watched, and where its children live.
//! #[controller(
//!     crd = AppDeployment,
//!     contexts = [Fleet::Control],
//!     namespaces = ["crds"],
//!     owns(Deployment, contexts = [Fleet::ClusterA, Fleet::ClusterB],
//!          namespaces = ["namespace-a", "namespace-b"]),
//!     finalizer = "demo.kubeplex.dev/cleanup",
//! )]
//! pub struct AppDeployer;
//!
//! // The business logic; `cx.cluster()` is the cluster `app` came from.
//! impl Reconcile for AppDeployer {
//!     type Error = kubeplex::Error;
//!
//!     async fn reconcile(&self, app: Arc<AppDeployment>, cx: &Cx<Fleet>) -> Result<Action, Self::Error> {
//!         let _ = (app, cx.cluster());
//!         Ok(Action::requeue(Duration::from_secs(3600)))
//!     }
//! }
//!
//! // What the attribute generated: a description the runtime executes.
//! let plan = AppDeployer::plan();
//! assert_eq!(plan.name(), "app-deployer");
//! assert_eq!(plan.primary_watches().collect::<Vec<_>>(), [(Fleet::Control, Some("crds"))]);
//! assert_eq!(plan.all_contexts(), [Fleet::Control, Fleet::ClusterA, Fleet::ClusterB]);
//! ```
//!
//! The keys of `#[controller]` are listed on [its page](macro@controller) and in
//! `docs/controller-attribute.md`; what it expands to is shown in `docs/expansion.md`.
#![deny(missing_docs)]
// docs.rs (`--cfg docsrs`, nightly) marks what a feature gates, such as `otlp`.
#![cfg_attr(docsrs, feature(doc_cfg))]
// A subsystem's main file is named after the noun it defines (`plan/plan.rs` defines `Plan`); its folder's
// face re-exports it, so no path ever reads `plan::plan`.
#![allow(clippy::module_inception)]

// Subsystems, lowest layer first: a folder imports only from folders above it in this list
// (docs/architecture.md; `tests/layers/` checks it). The public ones are the crate's map; their `mod.rs`
// is the face users see.
pub mod client;
mod controller;
mod core;
mod engine;
mod executor;
pub mod ha;
mod manager;
pub mod members;
mod metrics;
pub mod plan;
pub mod readiness;
mod runtime;
#[cfg(test)]
mod testing;
mod watch;
pub mod webhook;

// Span export over OTLP, off by default (docs/observability.md).
#[cfg(feature = "otlp")]
#[cfg_attr(docsrs, doc(cfg(feature = "otlp")))]
pub mod otlp;

#[doc(hidden)]
pub mod __private;

/// The clusters a controller works in: typed kubeconfig contexts, members that join at run time, and the
/// cluster that names either (docs/fleets.md).
pub mod fleet {
    pub use crate::core::{Cluster, Context, ContextName, ContextSet, Member, UnknownContext};
}

/// What kubeplex writes into a parent's status: each cluster's state and its children's health
/// (docs/ownership.md, "Status"); and the memo of a reconciler's own status writes its cache does not show
/// yet (docs/reconcile.md).
pub mod status {
    pub use crate::core::{
        ClusterHealth, ClusterState, ClusterStatus, Condition, FleetStatus, RecentWrites,
    };
}

/// A child's health, and the rules that judge it (docs/ownership.md, "Children's health").
pub mod health {
    pub use crate::core::{
        Assessment, ChildHealth, ConditionView, ContainerView, Health, HealthRule,
        MAX_HEALTH_REASON, Projection, SPEC_FIELDS,
    };
}

/// How children are marked as a parent's, and what becomes of them once no longer declared or when the
/// parent goes (docs/ownership.md).
pub mod ownership {
    pub use crate::core::{
        CONTROLLER_LABEL, DeletePolicy, ON_DELETE_ANNOTATION, ON_PRUNE_ANNOTATION,
        PARENT_ANNOTATION, PARENT_KIND_ANNOTATION, PARENT_UID_LABEL, PrunePolicy,
        SHARED_DIGEST_ANNOTATION, SHARED_LABEL,
    };
}

/// The permissions a manager's controllers need in each cluster, worked out from their plans (docs/rbac.md).
pub mod rbac {
    pub use crate::core::{ApiScope, Grant};
    pub use crate::manager::{ContextRbac, Rbac};
}

/// The log filter kubeplex's binaries start from.
pub mod logging {
    pub use crate::core::{DEFAULT_LOG_FILTER, QUIET_DIRECTIVES, log_filter};
}

pub use crate::core::{Action, Error, PrimaryResource, Result};
pub use crate::core::{Cluster, Context, ContextName, ContextSet};
pub use crate::core::{ClusterState, FleetStatus};
pub use controller::{ChildOptions, Controller, Cx, Reconcile};
pub use engine::CLUSTER_TIMEOUT;
/// Describes a controller: implements [`Controller`] for the struct it is on.
///
/// ```text
/// #[controller(
///     crd = Type,                          // required: the primary resource (a kube::Resource<DynamicType = ()>)
///     contexts = [Fleet::A, ..],           // required: where it is watched; or ["name", ..]
///     members,                             // flag: also watched in every member of the fleet
///     fleet = Fleet,                       // optional: check string contexts against a contexts! enum
///     namespaces = ["ns", ..],             // default: every namespace (DNS-1123 labels)
///     name = "my-controller",              // default: the struct's name in kebab-case; at most 63 characters
///     label_selector = "app=web",          // optional, syntax checked
///     field_selector = "metadata.name=x",  // optional, syntax checked
///     concurrency = 8,                     // default: unbounded; 1..=65535
///     debounce = "1s",                     // optional duration: ms, s, m, h, d ("1h30m")
///     requeue_after = "1h",                // optional duration
///     error_requeue = "30s",               // default: 5s
///     finalizer = "example.com/cleanup",   // optional, domain-qualified
///     abandon_unreachable_after = "1h",    // optional: give up on an unreachable cluster's children on deletion
///     abandon_terminating_after = "1h",    // optional: stop waiting on deletion for children still terminating
///     owns(Kind, members, contexts = [..], namespaces = [..]),  // repeatable: a child kind and where it lives
///                                          // `members` (a flag): also in every member of the fleet
///                                          // `prune = keep`: unlinked and left, not deleted, once no longer declared
///                                          // `on_delete = orphan`: unlinked and left, not deleted, with the parent
///     crate = path,                        // default: ::kubeplex
/// )]
/// ```
///
/// It applies to a non-generic struct (unit, tuple or with fields: your reconciler's state), which it
/// re-emits unchanged. Typed contexts (`Fleet::Control`) make `type Context` the fleet; string literals
/// make it [`ContextName`], or the `fleet` when one is given. All contexts of one controller, the
/// children's included, are of one kind and one fleet. An `owns` needs `contexts`, `members` or both;
/// `members` puts its children in every member of the fleet too (clusters discovered at run time, see
/// `docs/fleets.md`), in the same namespaces. Every mistake is a compile error at the offending token;
/// see `docs/controller-attribute.md` for each key in detail.
pub use kubeplex_macros::controller;
pub use manager::{Manager, Running};
pub use plan::{Child, Plan};
/// The Prometheus client kubeplex registers its metrics with, for registering your own
/// ([`Manager::register_metrics`]).
pub use prometheus_client;
pub use readiness::SecureMetrics;

/// The names most controllers need: `use kubeplex::prelude::*;`. Traits whose methods you call but whose
/// names you rarely write come in as `_`, so that your own `Context` (or `anyhow::Context`) does not
/// collide.
///
/// Besides the controller's own names, what a fleet operator uses: the status it reports
/// ([`FleetStatus`], [`ClusterState`]), the places children go
/// ([`Cluster`]), members from kubeconfig Secrets ([`KubeconfigSecrets`](members::KubeconfigSecrets),
/// [`LeavePolicy`](members::LeavePolicy)) and [`LeaderElection`](ha::LeaderElection).
///
/// ```
/// use kubeplex::prelude::*;
///
/// let _manager = Manager::new()
///     .leader_election(LeaderElection::new(kubeplex::ContextName::new("control"), "ops", "op"))
///     .members(
///         KubeconfigSecrets::new(kubeplex::ContextName::new("control"), "ops", "fleet=prod"),
///         LeavePolicy::Delete,
///     );
/// let status = FleetStatus::default();
/// assert!(status.clusters.values().all(|c| c.state != ClusterState::Failed));
/// let _: Option<Cluster<kubeplex::ContextName>> = None;
/// ```
pub mod prelude {
    pub use crate::ha::LeaderElection;
    pub use crate::members::{KubeconfigSecrets, LeavePolicy};
    pub use crate::{
        Action, Cluster, ClusterState, Context as _, ContextSet as _, Controller as _, Cx,
        FleetStatus, Manager, Reconcile, controller,
    };
}
