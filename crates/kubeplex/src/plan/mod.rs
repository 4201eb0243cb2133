//! Plans: what a controller declares (primary, contexts, namespaces, children, watched kinds, timings) and the checks
//! `Manager::start` runs on it.

mod check;
mod child;
mod dispatch;
mod grants;
mod places;
mod plan;
mod watch;

pub use crate::watch::MapFn;
pub(crate) use check::cluster_scoped;
pub use child::Child;
pub use dispatch::Dispatch;
pub use plan::{
    DEFAULT_ERROR_REQUEUE, DEFAULT_HEALTH_DEBOUNCE, MAX_CONTROLLER_NAME, MAX_ERROR_REQUEUE, Plan,
};
pub use watch::Watch;
