//! Plans: what a controller declares (primary, contexts, namespaces, children, timings) and the checks
//! `Manager::start` runs on it.

mod check;
mod child;
mod dispatch;
mod grants;
mod plan;

pub(crate) use check::cluster_scoped;
pub use child::Child;
pub use dispatch::Dispatch;
pub use plan::{
    DEFAULT_ERROR_REQUEUE, DEFAULT_HEALTH_DEBOUNCE, MAX_CONTROLLER_NAME, MAX_ERROR_REQUEUE, Plan,
};
