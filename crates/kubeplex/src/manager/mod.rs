//! The process: the manager, controller registration, a running manager, supervision, signals and the
//! member runner.

mod connections;
mod fleet;
mod identities;
mod manager;
mod members;
mod rbac;
mod registration;
mod running;
mod servers;
mod serving;
mod signals;
mod supervise;

pub use manager::Manager;
pub use rbac::{ContextRbac, Rbac};
pub use running::Running;
