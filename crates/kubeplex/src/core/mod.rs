//! The foundations every layer uses: actions, contexts, members and clusters, errors and how they read,
//! resource bounds, ownership labels, status types and the memo of a controller's own writes, the failure
//! wording shared by probes, logs and statuses, redaction, logging defaults and the throttle of repeated
//! warnings. Imports nothing of the crate.

mod action;
mod capacity;
mod child_health;
mod child_policy;
mod cluster;
mod cluster_health;
mod context;
mod contexts_macro;
mod deadline;
mod error;
mod failure;
mod grant;
mod health_rules;
mod log_throttle;
mod logging;
mod ownership;
mod projection;
mod recent_writes;
mod redact;
mod resource;
mod sharing;
mod status;

pub use action::Action;
pub(crate) use action::Verdict;
pub(crate) use capacity::Shrink;
pub(crate) use child_health::assess;
pub use child_health::{Assessment, ChildHealth, Health, HealthRule, MAX_HEALTH_REASON};
pub use child_policy::{DeletePolicy, ON_DELETE_ANNOTATION, ON_PRUNE_ANNOTATION, PrunePolicy};
pub(crate) use cluster::name_problem;
pub use cluster::{Cluster, Member};
pub use cluster_health::ClusterHealth;
pub use context::{Context, ContextName, ContextSet, UnknownContext};
#[cfg(test)]
pub(crate) use deadline::MAX_DELAY;
pub(crate) use deadline::deadline;
pub(crate) use error::chain;
pub use error::{Error, Result};
pub(crate) use failure::{
    Fenced, IdentityRefusal, WatchPlace, cut, fenced, identity_refusal, is_transport, may_pass,
    transport, watch_failure, watch_failure_label,
};
pub use grant::Grant;
pub(crate) use grant::events_grant;
pub(crate) use health_rules::builtin_rule;
pub(crate) use log_throttle::{Line, LogThrottle};
pub use logging::{DEFAULT_LOG_FILTER, QUIET_DIRECTIVES, log_filter};
pub use ownership::{
    CONTROLLER_LABEL, PARENT_ANNOTATION, PARENT_KIND_ANNOTATION, PARENT_UID_LABEL,
};
pub(crate) use ownership::{ParentRef, unlink_patch};
pub(crate) use ownership::{written_by, written_by_its_controller, written_marker};
pub use projection::{ConditionView, ContainerView, Projection, SPEC_FIELDS};
pub use recent_writes::RecentWrites;
pub(crate) use redact::kubeconfig_error;
pub use resource::{ApiScope, PrimaryResource};
pub(crate) use resource::{format_kind, kind_label, namespaced_name, object_ref, version_number};
pub use sharing::{SHARED_DIGEST_ANNOTATION, SHARED_LABEL};
pub(crate) use sharing::{
    is_shared, is_shared_object, other_sharers, parents_of, sharing_label, sharing_parents,
    was_shared,
};
pub(crate) use status::{ClusterOutcome, now};
pub use status::{ClusterState, ClusterStatus, Condition, FleetStatus};
