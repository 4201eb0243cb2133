//! The process: the manager, controller registration, a running manager, supervision, signals and the
//! member runner.

mod fleet;
mod fleet_options;
mod join_retries;
mod manager;
mod member_change;
mod member_runner;
mod rbac;
mod registration;
mod running;
mod servers;
mod signals;
mod supervise;

pub use manager::Manager;
pub use rbac::{ContextRbac, Rbac};
pub use running::Running;
